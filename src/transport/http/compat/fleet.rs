//! The HTTP side of 2025 sessions shared by the nodes of a Redis bus
//! ([`crate::compat::SharedSessions`]): the GET stream recorded in Redis as
//! held by this node, `resources/subscribe` / `unsubscribe` applied to the
//! stream wherever it is held, and the control messages other nodes send for
//! the streams held here.

use std::sync::Arc;
use std::time::Duration;

use actix::Actor as _;
use actix_web::{HttpResponse, web};
use tokio::sync::{OwnedSemaphorePermit, mpsc, oneshot};

use super::fleet_events;
use super::get_stream::{gone, not_ours, not_reserved, session_gone, state_refusal};
use super::resumable::ReaderConfig;
use super::session::Session;
use super::{AppState, Compat};
use crate::compat::{Claim, Control, LegacyStream, Reserve, SharedSessions, StateKey, Unconfirmed};
use crate::mux::{Assigns, Outbox, OutboxReceiver};
use crate::protocol::{McpError, RequestId, RequestMeta};
use crate::runtime::{CloseReason, Connection, StopStream, UriOutcome};
use crate::subscription::SubscriptionHandler;

/// How often a held GET stream is checked for its end (to let go of it in
/// Redis).
const WATCH_EVERY: Duration = Duration::from_millis(200);
/// Every how many [`WATCH_EVERY`]s a held GET stream is checked against
/// Redis (5 s): a session DELETEd on another node whose control message was
/// lost (the bus delivers at most once) ends its stream within this.
const RECHECK_EVERY: u32 = 25;
/// How long a URI change forwarded to the GET stream's node waits for it to
/// be applied there.
const FORWARD_WAIT: Duration = Duration::from_secs(2);

fn shared_of(compat: &Compat) -> Result<&SharedSessions, McpError> {
    compat
        .shared
        .as_ref()
        .ok_or_else(|| McpError::internal("Internal error: sessions are not shared"))
}

/// `resources/subscribe` / `unsubscribe` of a shared session: recorded in
/// Redis, then applied to the GET stream by the node holding it (here: at
/// once, with the handler's answer; elsewhere: over the bus).
pub(super) async fn change_uri<H: SubscriptionHandler>(
    state: &AppState<H>,
    compat: &Compat,
    key: &StateKey<'_>,
    uri: &str,
    subscribe: bool,
    max_uris: usize,
) -> Result<(), McpError> {
    let shared = shared_of(compat)?;
    let recorded = shared.change_uri(key, uri, subscribe, max_uris).await?;
    if !recorded.changed {
        return Ok(());
    }
    let mut holder = recorded.holder;
    // The holder's node is gone: no stream runs to apply it to; the next
    // GET stream opens with the URIs recorded in Redis. (Not known: as if
    // it lived, the forwarding below undoes the change if it must.)
    if matches!(shared.let_go_if_gone(key, &holder).await, Ok(true)) {
        holder.clear();
    }
    let ack = shared.new_ack(key.sid);
    let control = Control::Uri {
        sid: key.sid.to_owned(),
        uri: uri.to_owned(),
        subscribe,
        ack: ack.clone(),
    };
    let applied = match shared.forward(&holder, control).await {
        // Answered once the holder applied it (as on one node); withdrawn
        // (never applied) when it did not in time.
        Ok(true) => shared.wait_applied(&ack, FORWARD_WAIT).await,
        Ok(false) => match sync_uri(state, compat, key.sid, uri).await {
            Ok(synced) => synced.outcome_for(subscribe),
            Err(error) => Err(error),
        }
        .map_err(|error| Unconfirmed { error, undo: true }),
        // Not sent (nothing to apply it), or its fate not known.
        Err(unconfirmed) => Err(unconfirmed),
    };
    let Err(Unconfirmed { error, undo }) = applied else {
        return Ok(());
    };
    if !undo {
        return Err(error);
    }
    // The stream keeps its earlier filter: the session's set goes back
    // (only while this is the session's last change: undoing it under a
    // newer one could erase that one), and the stream is brought in line
    // with Redis either way (a turn of another change of the URI may have
    // applied the refused state meanwhile).
    let undone = shared
        .undo_uri(key, uri, subscribe, max_uris, &recorded.token)
        .await;
    if undone.is_ok() {
        resync(state, compat, key.sid, uri, &holder).await;
    }
    match undone {
        Ok(true) => Err(error),
        Ok(false) => Err(not_undone()),
        Err(e) => {
            tracing::debug!(error = %e, "a refused URI change not undone");
            Err(not_undone())
        }
    }
}

/// The answer to a change that was not applied and could not be undone: it
/// stays recorded, and the stream may take it (a restart reads the set).
fn not_undone() -> McpError {
    McpError::internal(
        "Internal error: the change was not confirmed by the node holding this session's GET stream, and it is still recorded; retry",
    )
}

/// Brings the held GET stream in line with Redis for `uri` after an undo:
/// here at once, or on the holder's node (not waited for: the message only
/// repeats what Redis records).
async fn resync<H: SubscriptionHandler>(
    state: &AppState<H>,
    compat: &Compat,
    sid: &str,
    uri: &str,
    holder: &str,
) {
    let Some(shared) = compat.shared.as_ref() else {
        return;
    };
    if shared.elsewhere(holder).is_none() {
        if let Err(e) = sync_uri(state, compat, sid, uri).await {
            tracing::debug!(error = %e, "GET stream not brought in line after an undo");
        }
        return;
    }
    let control = Control::Uri {
        sid: sid.to_owned(),
        uri: uri.to_owned(),
        // Only what Redis records is applied.
        subscribe: false,
        ack: shared.new_ack(sid),
    };
    if shared.forward(holder, control).await.is_err() {
        tracing::debug!("GET stream's node not told to follow an undo");
    }
}

/// What a turn of one URI found in Redis and did to the stream.
struct Synced {
    /// Whether Redis records the URI as subscribed (`None`: no stream is
    /// held here, nothing was read or applied).
    subscribed: Option<bool>,
    /// The stream's answer to that state.
    applied: Result<(), McpError>,
}

impl Synced {
    /// The outcome of a change that asked for `subscribe`: the stream's
    /// answer when Redis still records it; `Ok` when a newer change of the
    /// URI was recorded since (this one happened, then that one: its own
    /// outcome, and undo, are that change's).
    fn outcome_for(self, subscribe: bool) -> Result<(), McpError> {
        if self.subscribed.is_none_or(|s| s == subscribe) {
            self.applied
        } else {
            if let Err(error) = &self.applied {
                tracing::debug!(%error, "the stream refused a newer change of the URI");
            }
            Ok(())
        }
    }
}

/// One turn of `uri` on the session's GET stream held here: reads whether
/// Redis records it now and applies that (a change the stream has already
/// is answered at once), in turn with the session's other changes. So the
/// stream ends with each URI as Redis records it, whatever order the
/// changes' messages came in from the other nodes: one whose message came
/// after a newer change of the URI was recorded does not undo it. An error:
/// Redis could not say (nothing was applied).
async fn sync_uri<H: SubscriptionHandler>(
    state: &AppState<H>,
    compat: &Compat,
    sid: &str,
    uri: &str,
) -> Result<Synced, McpError> {
    let shared = shared_of(compat)?;
    // The turn of the stream held now: a takeover by a new GET here
    // installs a new one, which a waiter on the old one must not skip.
    let mut tries = 0;
    let _turn = loop {
        let Some(turn) = shared.uri_turn(sid) else {
            return Ok(Synced {
                subscribed: None,
                applied: Ok(()),
            });
        };
        let guard = turn.clone().lock_owned().await;
        if shared
            .uri_turn(sid)
            .is_some_and(|now| Arc::ptr_eq(&now, &turn))
        {
            break guard;
        }
        tries += 1;
        if tries >= 3 {
            // Taken over again and again meanwhile: the stream held now
            // opened with the set from Redis (and reads it again once open).
            return Ok(Synced {
                subscribed: None,
                applied: Ok(()),
            });
        }
    };
    let subscribed = shared.is_subscribed(sid, uri).await?;
    let applied = match shared.live(sid) {
        Some(live) => apply(state, compat, sid, &live, uri, subscribed).await,
        None => Ok(()),
    };
    Ok(Synced {
        subscribed: Some(subscribed),
        applied,
    })
}

/// Applies one URI change to the GET stream `live` held here.
async fn apply<H: SubscriptionHandler>(
    state: &AppState<H>,
    compat: &Compat,
    sid: &str,
    live: &LegacyStream,
    uri: &str,
    subscribe: bool,
) -> Result<(), McpError> {
    match live.change(uri, subscribe).await? {
        UriOutcome::Applied => Ok(()),
        UriOutcome::Restart => restart(state, compat, sid, live).await,
    }
}

/// Restarts the held GET stream's actor with the session's URIs from Redis
/// (the new actor first, then the old one is stopped).
async fn restart<H: SubscriptionHandler>(
    state: &AppState<H>,
    compat: &Compat,
    sid: &str,
    live: &LegacyStream,
) -> Result<(), McpError> {
    let shared = shared_of(compat)?;
    let uris = shared.uris(sid).await?;
    let id = RequestId::String(format!("get-{}", compat.next_generation()));
    let started = live.start(&state.suite, &state.server, uris, id).await;
    let stop = started.inspect_err(|error| {
        tracing::debug!(%error, "GET stream not restarted; it keeps its earlier filter");
    })?;
    if let Some(old) = stop.and_then(|stop| shared.swap_get_stream(sid, live, stop)) {
        let _ = old.stop.send(StopStream(CloseReason::Cancelled)).await;
    }
    Ok(())
}

/// How many control messages a node applies at once. Each waits for its
/// session's turn only (a turn reads Redis, so their order does not
/// matter): a session busy with a local change does not hold up the
/// others'. Past this, messages wait in the control queue.
const CONTROLS_AT_ONCE: usize = 64;

/// Applies the control messages other nodes send for the GET streams held
/// here, for as long as the endpoint lives.
async fn control_loop<H: SubscriptionHandler>(
    state: web::Data<AppState<H>>,
    compat: Arc<Compat>,
    mut rx: mpsc::Receiver<Control>,
) {
    let slots = Arc::new(tokio::sync::Semaphore::new(CONTROLS_AT_ONCE));
    while let Some(control) = rx.recv().await {
        let Ok(slot) = slots.clone().acquire_owned().await else {
            return;
        };
        let (state, compat) = (state.clone(), compat.clone());
        actix_rt::spawn(async move {
            control_one(&state, &compat, control).await;
            drop(slot);
        });
    }
}

/// Applies one control message from another node.
async fn control_one<H: SubscriptionHandler>(
    state: &AppState<H>,
    compat: &Compat,
    control: Control,
) {
    let Some(shared) = compat.shared.as_ref() else {
        return;
    };
    match control {
        Control::Uri {
            sid,
            uri,
            subscribe,
            ack,
        } => {
            // Applied only once claimed: the forwarding node may have
            // withdrawn it (it waited no longer).
            if !shared.claim(&ack).await {
                tracing::debug!("a URI change from another node withdrawn before it came");
                return;
            }
            // No stream here any more: nothing to apply (a new one reads
            // the set from Redis).
            let outcome = match sync_uri(state, compat, &sid, &uri).await {
                Ok(synced) => synced.outcome_for(subscribe),
                Err(error) => Err(error),
            };
            if let Err(error) = &outcome {
                tracing::debug!(%error, "a URI change from another node refused");
            }
            shared.applied(&ack, &outcome).await;
        }
        Control::Delete { sid, ack } => {
            if let Some(running) = shared.take_live(&sid).as_ref().and_then(|l| l.running()) {
                let _ = running
                    .stop
                    .send(StopStream(CloseReason::Disconnected))
                    .await;
            }
            if let Some(ack) = ack {
                shared.applied(&ack, &Ok(())).await;
            }
        }
    }
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
        return read(state, &compat, session, &tag, after, config).await;
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
    let connection = Connection::exchange(server.clone(), tx.clone(), done_tx).start();
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
    let watcher = Held {
        compat: held.compat.clone(),
        sid: held.sid.clone(),
        owner: held.owner.clone(),
        generation,
        expires: held.expires,
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
    let owned = fleet_events::Owned {
        sid: session.sid.clone(),
        owner: session.owner.clone(),
        expires: session.expires,
    };
    fleet_events::spawn_pump(compat.clone(), owned.clone(), holder.clone(), rx, done_rx);
    fleet_events::response(
        compat.clone(),
        (owned, tag),
        (reader, holder),
        head,
        config,
        state.server.clone(),
    )
}

/// The response reading the session's Redis stream after `after` (an entry
/// id), or from its head when the stream has no reader.
async fn read<H: SubscriptionHandler>(
    state: &web::Data<AppState<H>>,
    compat: &Arc<Compat>,
    session: &Session,
    tag: &str,
    after: Option<String>,
    config: ReaderConfig,
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
        Ok(Claim::Claimed { head, holder }) => fleet_events::response(
            compat.clone(),
            (
                fleet_events::Owned {
                    sid: session.sid.clone(),
                    owner: session.owner.clone(),
                    expires: session.expires,
                },
                tag.to_owned(),
            ),
            (reader, holder),
            after.unwrap_or(head),
            config,
            state.server.clone(),
        ),
    }
}
