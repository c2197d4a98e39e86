//! `resources/subscribe` / `unsubscribe` of 2025 sessions shared by the
//! nodes of a Redis bus: recorded in Redis, applied in turn to the GET
//! stream by the node holding it (here, or over the bus: the control
//! messages other nodes send for the streams held here), and undone when
//! not applied.

use std::sync::Arc;
use std::time::Duration;

use actix_web::web;
use tokio::sync::mpsc;

use super::fleet::shared_of;
use super::{AppState, Compat};
use crate::compat::{Control, LegacyStream, StateKey, Unconfirmed};
use crate::protocol::{McpError, RequestId};
use crate::runtime::{CloseReason, StopStream, UriOutcome};
use crate::subscription::SubscriptionHandler;

/// How long a URI change forwarded to the GET stream's node waits for it to
/// be applied there.
const FORWARD_WAIT: Duration = Duration::from_secs(2);

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
    // Recorded already (a repeat, or a change a failed undo left recorded):
    // still answered once the holder's stream has it too, never undone here.
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
    if !undo || !recorded.changed {
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
    /// No stream of the session is held here (any more): nothing to do.
    const NOT_HELD: Synced = Synced {
        subscribed: None,
        applied: Ok(()),
    };

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
            return Ok(Synced::NOT_HELD);
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
            return Ok(Synced::NOT_HELD);
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
pub(super) async fn restart<H: SubscriptionHandler>(
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
pub(super) async fn control_loop<H: SubscriptionHandler>(
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
        // For the stream's pump, which offers it (else nothing: the taker
        // gives up when its wait ends).
        Control::Cut { sid, token } => {
            if let Some(cuts) = shared.cuts(&sid)
                && cuts.try_send(token).is_err()
            {
                tracing::debug!("a cut request found its pump busy; the taker gives up");
            }
        }
    }
}
