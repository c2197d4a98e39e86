//! A session's one GET stream: who holds it (in Redis), and the streams held
//! on this node.

use super::super::{LegacyStream, Reserve, StateKey};
use super::owner::unexpected;
use super::scripts::{HOLDS_GET, RELEASE_GET, RESERVE_GET, eval, session_keys};
use super::{SharedSessions, unavailable};
use crate::protocol::McpError;
use crate::runtime::SessionStreamControl;
use crate::suite::sealing::seal;

/// The first pause between tries to let go of a GET stream's holder in
/// Redis while Redis cannot be reached.
const RELEASE_BACKOFF_MIN: std::time::Duration = std::time::Duration::from_millis(250);
/// The longest pause between those tries: a holder is let go at most this
/// long after Redis is back.
pub(crate) const RELEASE_BACKOFF_MAX: std::time::Duration = std::time::Duration::from_secs(2);

/// The GET stream of a session held on this node.
pub(super) struct Slot {
    generation: u64,
    owner: String,
    /// `None` while the stream is being opened.
    pub(super) live: Option<LegacyStream>,
    /// The session's URI changes take turns on it ([`SharedSessions::uri_turn`]).
    turn: UriTurn,
    /// Where a taker's cut requests go while the stream is offered
    /// ([`SharedSessions::cuts`]).
    cuts: Option<tokio::sync::mpsc::Sender<String>>,
}

/// One session's URI changes, applied to its GET stream one at a time on
/// the node holding it: each reads the session's set in Redis and applies
/// it, so the stream ends with the set as recorded whatever order the
/// changes' messages came in. An async mutex (a fair FIFO queue of
/// waiters), held across the read and the stream's answer on purpose; no
/// other lock is taken while it is held.
pub(crate) type UriTurn = std::sync::Arc<tokio::sync::Mutex<()>>;

impl Slot {
    fn busy(&self) -> bool {
        self.live.as_ref().is_none_or(LegacyStream::alive)
    }
}

impl SharedSessions {
    /// Reserves the session's one GET stream for reservation `generation`
    /// of this node (which must hold its lease). A holder elsewhere counts
    /// while its node's lease lives; one here while its stream is open.
    pub(crate) async fn reserve_get(
        &self,
        session: &StateKey<'_>,
        generation: u64,
    ) -> Result<Reserve, McpError> {
        let me = self.holder(generation);
        let mut expected = String::new();
        for _ in 0..3 {
            let args = [me.clone(), expected.clone()];
            let answer = self.run_counted(RESERVE_GET, session, &args).await?;
            let holder = match answer.as_slice() {
                [r] if r == "R" => {
                    self.lock().insert(
                        session.sid.to_owned(),
                        Slot {
                            generation,
                            owner: session.owner.to_owned(),
                            live: None,
                            turn: UriTurn::default(),
                            cuts: None,
                        },
                    );
                    return Ok(Reserve::Reserved);
                }
                [d] if d == "D" => return Ok(Reserve::Deleted),
                [h, holder] if h == "H" => holder.as_str(),
                _ => return Err(unexpected()),
            };
            let (node, n) = holder.rsplit_once(':').unwrap_or((holder, ""));
            let busy = if node == self.node.node() {
                self.lock()
                    .get(session.sid)
                    .is_some_and(|s| s.busy() && n.parse::<u64>().ok() == Some(s.generation))
            } else {
                self.node.alive(node).await.map_err(|e| unavailable(&e))?
            };
            if busy {
                return Ok(Reserve::Busy);
            }
            // Its stream ended, or its node is gone: take it over.
            expected = holder.to_owned();
        }
        Ok(Reserve::Busy)
    }

    /// Records the opened GET stream of reservation `generation`. `Ok(false)`
    /// when the session was deleted (or the stream taken over) meanwhile: the
    /// caller stops the stream it opened.
    pub(crate) async fn commit_get(
        &self,
        session: &StateKey<'_>,
        generation: u64,
        live: LegacyStream,
    ) -> Result<bool, McpError> {
        {
            let mut local = self.lock();
            match local
                .get_mut(session.sid)
                .filter(|s| s.generation == generation && s.live.is_none())
            {
                Some(slot) => slot.live = Some(live),
                None => return Ok(false),
            }
        }
        let keys = session_keys(&self.node, session.sid);
        let held: i64 = self
            .run(eval(HOLDS_GET, &keys, &[self.holder(generation)]))
            .await?;
        Ok(held == 1)
    }

    /// Whether GET reservation `generation` still holds the session's GET
    /// stream in Redis: `false` once the session was DELETEd (or the stream
    /// taken over by another node), even if the control message saying so
    /// never arrived (the bus delivers at most once).
    pub(crate) async fn still_holds(&self, sid: &str, generation: u64) -> Result<bool, McpError> {
        let keys = session_keys(&self.node, sid);
        let held: i64 = self
            .run(eval(HOLDS_GET, &keys, &[self.holder(generation)]))
            .await?;
        Ok(held == 1)
    }

    /// Whether `holder` (as Redis names the session's GET stream's holder)
    /// is on another node that is gone (it holds no lease): its mark is then
    /// let go, as a takeover would (a node only paused stops that stream at
    /// its next check of the mark), so that a change is recorded for the
    /// next GET stream instead of waiting for a node that cannot apply it.
    pub(crate) async fn let_go_if_gone(
        &self,
        session: &StateKey<'_>,
        holder: &str,
    ) -> Result<bool, McpError> {
        let Some(node) = self.elsewhere(holder) else {
            return Ok(false);
        };
        if self.node.alive(node).await.map_err(|e| unavailable(&e))? {
            return Ok(false);
        }
        let args = [holder.to_owned(), "1".to_owned()];
        self.run_counted(RELEASE_GET, session, &args).await?;
        Ok(true)
    }

    /// Lets go of GET reservation `generation` of `owner`'s session (its
    /// stream ended or never opened; the owner is the slot's here, when it
    /// has one), here and in Redis. While Redis cannot be reached it retries,
    /// backing off to [`RELEASE_BACKOFF_MAX`] between tries, until Redis is
    /// back or the session expires (`expires`, ms since the epoch; its keys
    /// are gone then): until then no other node may open the session's GET
    /// stream, unless this node's lease lapses.
    pub(crate) async fn release_get(
        &self,
        (sid, owner): (&str, &str),
        generation: u64,
        expires: u64,
    ) {
        let owner = {
            let mut local = self.lock();
            match local.get(sid) {
                Some(slot) if slot.generation == generation => local.remove(sid).map(|s| s.owner),
                // Never recorded here (the reservation's answer was lost):
                // the session may still have been counted for its owner.
                _ => (!owner.is_empty()).then(|| owner.to_owned()),
            }
        };
        let me = self.holder(generation);
        let key = StateKey {
            sid,
            owner: owner.as_deref().unwrap_or(""),
            expires,
        };
        let args = [me, if owner.is_some() { "1" } else { "0" }.to_owned()];
        let mut pause = RELEASE_BACKOFF_MIN;
        let mut warned = false;
        loop {
            match self.run_counted(RELEASE_GET, &key, &args).await {
                Ok(_) => {
                    if warned {
                        tracing::info!(sid, "GET stream's holder released in Redis");
                    }
                    return;
                }
                Err(_) if seal::now_ms() >= expires => {
                    tracing::warn!(
                        sid,
                        "GET stream's holder not released before its session expired"
                    );
                    return;
                }
                Err(_) => {
                    if !warned && pause >= RELEASE_BACKOFF_MAX {
                        warned = true;
                        tracing::warn!(
                            sid,
                            "GET stream's holder not released in Redis yet; retrying until Redis is back"
                        );
                    }
                    tokio::time::sleep(pause).await;
                    pause = (pause * 2).min(RELEASE_BACKOFF_MAX);
                }
            }
        }
    }

    /// Ends the GET stream of reservation `generation` on this node when it
    /// no longer holds the session in Redis (DELETEd, or taken over): the
    /// stream actor that runs now, whichever restart installed it, is
    /// returned to be stopped, and the session leaves this node's table.
    /// `Ok(None)` while it still holds it.
    pub(crate) async fn end_if_lost(
        &self,
        sid: &str,
        generation: u64,
    ) -> Result<Option<SessionStreamControl>, McpError> {
        if self.still_holds(sid, generation).await? {
            return Ok(None);
        }
        let mut local = self.lock();
        if local.get(sid).is_none_or(|s| s.generation != generation) {
            return Ok(None);
        }
        Ok(local
            .remove(sid)
            .and_then(|s| s.live)
            .and_then(|l| l.running().cloned()))
    }

    /// The turn of the session's URI changes, when its GET stream is held
    /// on this node (open or opening).
    pub(crate) fn uri_turn(&self, sid: &str) -> Option<UriTurn> {
        self.lock().get(sid).map(|s| s.turn.clone())
    }

    /// The session's GET stream on this node, when one is open.
    pub(crate) fn live(&self, sid: &str) -> Option<LegacyStream> {
        self.lock()
            .get(sid)
            .and_then(|s| s.live.clone())
            .filter(LegacyStream::alive)
    }

    /// Installs a restarted stream actor in the session's GET stream `live`
    /// on this node; returns the one it replaced, to stop (or `stop` itself
    /// when that stream is gone).
    pub(crate) fn swap_get_stream(
        &self,
        sid: &str,
        live: &LegacyStream,
        stop: SessionStreamControl,
    ) -> Option<SessionStreamControl> {
        let mut local = self.lock();
        match local
            .get_mut(sid)
            .and_then(|s| s.live.as_mut())
            .filter(|l| l.connection() == live.connection())
        {
            Some(l) => l.install(stop),
            None => Some(stop),
        }
    }

    /// Records the GET stream this node took over from a draining node (as
    /// reservation `generation`, which Redis names as the holder now); the
    /// stream actor of a slot it replaced, if any, to stop.
    pub(crate) fn adopt_get(
        &self,
        sid: &str,
        owner: &str,
        generation: u64,
        live: LegacyStream,
    ) -> Option<SessionStreamControl> {
        let replaced = self.lock().insert(
            sid.to_owned(),
            Slot {
                generation,
                owner: owner.to_owned(),
                live: Some(live),
                turn: UriTurn::default(),
                cuts: None,
            },
        );
        replaced
            .and_then(|s| s.live)
            .and_then(|l| l.running().cloned())
    }

    /// Where the cut requests for the session's GET stream of reservation
    /// `generation` go (its pump, while it offers the stream).
    pub(crate) fn set_cuts(
        &self,
        sid: &str,
        generation: u64,
        tx: tokio::sync::mpsc::Sender<String>,
    ) {
        if let Some(slot) = self
            .lock()
            .get_mut(sid)
            .filter(|s| s.generation == generation)
        {
            slot.cuts = Some(tx);
        }
    }

    /// Where a cut request for the session's GET stream goes, if held here.
    pub(crate) fn cuts(&self, sid: &str) -> Option<tokio::sync::mpsc::Sender<String>> {
        self.lock().get(sid).and_then(|s| s.cuts.clone())
    }

    /// The stream actor running now for the session's GET stream of
    /// reservation `generation` on this node.
    pub(crate) fn running_get(&self, sid: &str, generation: u64) -> Option<SessionStreamControl> {
        self.lock()
            .get(sid)
            .filter(|s| s.generation == generation)
            .and_then(|s| s.live.as_ref())
            .and_then(|l| l.running().cloned())
    }

    /// Takes the session's GET stream out of this node's table (a DELETE
    /// from another node), to stop it.
    pub(crate) fn take_live(&self, sid: &str) -> Option<LegacyStream> {
        self.lock().remove(sid).and_then(|s| s.live)
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::compat::StoreBounds;
    use crate::mux::SharedNotification;
    use crate::pubsub::redis_child::{RedisChild, block_on};
    use crate::pubsub::{Bus, RedisBusConfig};
    use crate::suite::tasks::SharedTasks;

    #[test]
    fn a_released_holder_is_let_go_once_not_retried_until_the_session_expires() {
        let redis = RedisChild::start();
        block_on(async {
            let bus: Bus<SharedNotification> = Bus::redis(RedisBusConfig::new(redis.url()))
                .await
                .expect("connected");
            let node = SharedTasks::new(bus.once().expect("a Redis bus"), bus.clone());
            let sessions = SharedSessions::new(
                node,
                StoreBounds {
                    max_sessions: 10,
                    max_uris: 10,
                    per_owner_sessions: 10,
                    per_owner_uris: 10,
                },
            );
            // Redis answers at once: the release is done, not retried for the
            // session's whole life (a minute here, a day by default).
            let expires = seal::now_ms() + 60_000;
            let released = tokio::time::timeout(
                Duration::from_secs(10),
                sessions.release_get(("s1", ""), 1, expires),
            )
            .await;
            assert!(released.is_ok(), "release_get still retrying");
        });
    }
}
