//! A session's one GET stream: who holds it (in Redis), and the streams held
//! on this node.

use super::super::{LegacyStream, Reserve, StateKey};
use super::scripts::{HOLDS_GET, RELEASE_GET, RESERVE_GET, eval, session_keys};
use super::{SharedSessions, unavailable};
use crate::protocol::McpError;
use crate::runtime::SessionStreamControl;

/// The GET stream of a session held on this node.
pub(super) struct Slot {
    generation: u64,
    owner: String,
    /// `None` while the stream is being opened.
    pub(super) live: Option<LegacyStream>,
}

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
        self.admit(session, None).await?;
        let keys = session_keys(&self.node, session.sid);
        let me = self.holder(generation);
        let mut expected = String::new();
        for _ in 0..3 {
            let args = [me.clone(), expected.clone(), session.expires.to_string()];
            let answer: String = self.run(eval(RESERVE_GET, &keys, &args)).await?;
            match answer.as_str() {
                "R" => {
                    self.lock().insert(
                        session.sid.to_owned(),
                        Slot {
                            generation,
                            owner: session.owner.to_owned(),
                            live: None,
                        },
                    );
                    return Ok(Reserve::Reserved);
                }
                "D" => return Ok(Reserve::Deleted),
                holder => {
                    let (node, n) = holder.rsplit_once(':').unwrap_or((holder, ""));
                    let busy = if node == self.node.node() {
                        self.lock().get(session.sid).is_some_and(|s| {
                            s.busy() && n.parse::<u64>().ok() == Some(s.generation)
                        })
                    } else {
                        self.node.alive(node).await.map_err(|e| unavailable(&e))?
                    };
                    if busy {
                        return Ok(Reserve::Busy);
                    }
                    // Its stream ended, or its node is gone: take it over.
                    expected = holder.to_owned();
                }
            }
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

    /// Lets go of GET reservation `generation` (its stream ended or never
    /// opened), here and in Redis; retried a few times while Redis is away
    /// (until then no other node may open the session's GET stream).
    pub(crate) async fn release_get(&self, sid: &str, generation: u64) {
        let owner = {
            let mut local = self.lock();
            match local.get(sid) {
                Some(slot) if slot.generation == generation => local.remove(sid).map(|s| s.owner),
                _ => None,
            }
        };
        let keys = session_keys(&self.node, sid);
        let me = self.holder(generation);
        for attempt in 0..5u32 {
            match self
                .run::<i64>(eval(RELEASE_GET, &keys, std::slice::from_ref(&me)))
                .await
            {
                Ok(empty) => {
                    if empty == 1
                        && let Some(owner) = &owner
                    {
                        self.forget(owner, Some(sid), &[]).await;
                    }
                    return;
                }
                Err(_) => {
                    tokio::time::sleep(std::time::Duration::from_millis(500 << attempt)).await;
                }
            }
        }
        tracing::warn!(sid, "GET stream's holder not released in Redis");
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

    /// Takes the session's GET stream out of this node's table (a DELETE
    /// from another node), to stop it.
    pub(crate) fn take_live(&self, sid: &str) -> Option<LegacyStream> {
        self.lock().remove(sid).and_then(|s| s.live)
    }
}
