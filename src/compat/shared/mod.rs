//! 2025 sessions shared by the nodes of one Redis bus: what a session sets at
//! run time lives in Redis, so any node serves any of its requests.
//!
//! Keys (under the bus's prefix; every one shares the `{sessions}` hash slot,
//! so each script checks every bound it touches and counts what it adds in
//! one atomic step):
//!
//! | key | what |
//! |---|---|
//! | `sess:{sessions}:<sid>` | hash: `d` (DELETEd), `l` (the `logging/setLevel` level), `h` (the GET stream's holder, `<node>:<n>`); while the stream moves off a draining node, `ho`, `hc`, `hn`, `he`, `hv`, `hl`, `hd` (`handoff`) |
//! | `sess:{sessions}:<sid>:uris` | set: the `resources/subscribe` URIs |
//! | `sess-owner:{sessions}:<owner>:sids` | sorted set: the owner's sessions with state, scored by expiry |
//! | `sess-owner:{sessions}:<owner>:uris` | sorted set: `<sid> <uri>` for each of the owner's URIs, scored by expiry |
//! | `sess-all:{sessions}:sids`, `sess-all:{sessions}:uris` | the same for the whole fleet (the global bounds) |
//!
//! Every key expires with the session (`PEXPIREAT` its expiry; an owner's
//! sets with its latest session); an entry whose session emptied is removed
//! in the script that emptied it, an expired one is swept.
//!
//! The node holding a session's GET stream keeps it in [`SharedSessions`]'s
//! local table and hears the control topic `sess-ctl/<node>`: another node's
//! `resources/subscribe`, `unsubscribe` or DELETE of the session is recorded
//! in Redis first, then sent there, and the holder changes the stream in
//! place (or ends it). A forwarded change is agreed on through its key
//! `sess:{<sid>}:ack:<n>` (see `forward`): applied by the holder only once it
//! claimed it, withdrawn by the forwarding node past its wait, never both. A
//! holder whose node lease (`task-node:<node>`, the shared tasks' lease) is
//! gone does not count: the session may open its GET stream elsewhere. The
//! holder checks its mark every 5 s and ends the stream actor that runs then
//! when the mark is gone; a mark left while Redis was away is let go once
//! Redis is back.
//!
//! Redis unreachable: every request that needs the session's state fails
//! with `-32603` "the shared session store is unavailable" (GET and DELETE
//! with 503); nothing is answered as if it had succeeded.
//!
//! The module by idea: `scripts` (key names, Lua scripts), `owner` (an
//! owner's bounds), `state` (level, URIs, DELETE), `get_stream` (the GET
//! stream's holder and this node's table), `control` (the messages to the
//! holder's node), `forward` (a forwarded URI change and its outcome),
//! `events` (the GET stream's events in a Redis stream, for `Last-Event-ID`
//! on any node), `post_events` (the POST streams' events, likewise).

mod control;
mod events;
mod forward;
mod get_stream;
mod handoff;
mod owner;
mod post_events;
mod scripts;
mod state;

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard, OnceLock};

use super::StoreBounds;
use crate::mux::SharedNotification;
use crate::protocol::McpError;
use crate::pubsub::{BusError, BusSubscription};
use crate::suite::tasks::SharedTasks;
use get_stream::Slot;

pub(crate) use control::Control;
pub(crate) use events::{Claim, Fetched};
pub(crate) use forward::Unconfirmed;
pub(crate) use handoff::{Cut, Prepared, Taking};
pub(crate) use post_events::{
    PostBounds, PostCheck, PostFetched, PostKind, PostOpened, PostWrite, Writer,
};

/// The answer when Redis cannot be asked: session requests fail closed.
/// A fresh 64-bit name, as 16 hex digits, for one forwarded change's
/// acknowledgement or one recorded URI change: random, or a time and a
/// counter of this process if the system's random source fails (unique
/// within the process either way).
fn fresh_name() -> String {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let mut bytes = [0u8; 8];
    let n = if getrandom::fill(&mut bytes).is_ok() {
        u64::from_le_bytes(bytes)
    } else {
        crate::suite::sealing::seal::now_ms()
            ^ NEXT
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed)
                .rotate_left(40)
    };
    format!("{n:016x}")
}

pub(crate) fn unavailable(e: &BusError) -> McpError {
    tracing::warn!(error = %e, "shared session store unavailable");
    McpError::internal("Internal error: the shared session store is unavailable; retry later")
}

/// The sessions' state in Redis, and the GET streams this node holds: see the
/// module documentation.
pub(crate) struct SharedSessions {
    node: SharedTasks,
    bounds: StoreBounds,
    local: Mutex<HashMap<String, Slot>>,
    control: OnceLock<BusSubscription<SharedNotification>>,
}

impl SharedSessions {
    /// Sessions shared through `node`'s Redis bus, each owner within
    /// `bounds`' per-owner bounds.
    pub(crate) fn new(node: SharedTasks, bounds: StoreBounds) -> Self {
        SharedSessions {
            node,
            bounds: StoreBounds {
                max_sessions: bounds.max_sessions.max(1),
                max_uris: bounds.max_uris.max(1),
                per_owner_sessions: bounds.per_owner_sessions.max(1),
                per_owner_uris: bounds.per_owner_uris.max(1),
            },
            local: Mutex::new(HashMap::new()),
            control: OnceLock::new(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<String, Slot>> {
        self.local.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// This node's holder name for GET reservation `generation`.
    pub(crate) fn holder(&self, generation: u64) -> String {
        format!("{}:{generation}", self.node.node())
    }

    async fn run<T>(&self, cmd: ::redis::Cmd) -> Result<T, McpError>
    where
        T: ::redis::FromRedisValue + Send + 'static,
    {
        self.node
            .keys()
            .query(cmd)
            .await
            .map_err(|e| unavailable(&e))
    }
}

/// Shared sessions over a fresh Redis with room for `max_sessions` (for the
/// tests of this module's parts).
#[cfg(test)]
async fn sessions_with(
    redis: &crate::pubsub::redis_child::RedisChild,
    max_sessions: usize,
) -> SharedSessions {
    use crate::pubsub::{Bus, RedisBusConfig};
    let bus: Bus<SharedNotification> = Bus::redis(RedisBusConfig::new(redis.url()))
        .await
        .expect("connected");
    let node = SharedTasks::new(bus.once().expect("a Redis bus"), bus.clone());
    let bounds = StoreBounds {
        max_sessions,
        max_uris: 10,
        per_owner_sessions: 10,
        per_owner_uris: 10,
    };
    SharedSessions::new(node, bounds)
}

/// Session `s1` of owner `o` (a minute left), its GET stream reserved as
/// reservation 1 and its history claimed by reader `r1` (for the tests of
/// this module's parts): its key and the claim's head.
#[cfg(test)]
async fn claimed_s1(sessions: &SharedSessions) -> (super::StateKey<'static>, String) {
    let key = super::StateKey {
        sid: "s1",
        owner: "o",
        expires: crate::suite::sealing::seal::now_ms() + 60_000,
    };
    let reserved = sessions.reserve_get(&key, 1).await.expect("reserved");
    assert!(matches!(reserved, super::Reserve::Reserved));
    let claimed = sessions
        .claim_events(&key, None, "r1", (false, true))
        .await
        .expect("claimed");
    let super::Claim::Claimed { head, .. } = claimed else {
        panic!("{claimed:?}");
    };
    (key, head)
}
