//! 2025 sessions shared by the nodes of one Redis bus: what a session sets at
//! run time lives in Redis, so any node serves any of its requests.
//!
//! Keys (under the bus's prefix; one session's keys share a cluster hash slot,
//! and so do one owner's):
//!
//! | key | what |
//! |---|---|
//! | `sess:{<sid>}` | hash: `d` (DELETEd), `l` (the `logging/setLevel` level), `h` (the GET stream's holder, `<node>:<n>`) |
//! | `sess:{<sid>}:uris` | set: the `resources/subscribe` URIs |
//! | `sess-owner:{<owner>}:sids` | sorted set: the owner's sessions with state, scored by expiry |
//! | `sess-owner:{<owner>}:uris` | sorted set: `<sid> <uri>` for each of the owner's URIs, scored by expiry |
//! | `sess-all:{sessions}:sids`, `sess-all:{sessions}:uris` | the same for the whole fleet (the global bounds) |
//!
//! Every key expires with the session (`PEXPIREAT` its expiry; an owner's
//! sets with its latest session). Each Lua script touches the keys of one
//! slot only; the owner's bounds and the session's keys are updated one after
//! the other (an owner's count may be briefly high, never low for long: an
//! entry whose session emptied is removed, an expired one is swept).
//!
//! The node holding a session's GET stream keeps it in [`SharedSessions`]'s
//! local table and hears the control topic `sess-ctl/<node>`: another node's
//! `resources/subscribe`, `unsubscribe` or DELETE of the session is recorded
//! in Redis first, then sent there, and the holder changes the stream in
//! place (or ends it). For a URI change the holder writes the outcome under
//! `sess:{<sid>}:ack:<n>` (10 s), which the forwarding node waits for before
//! it answers. A holder whose node lease (`task-node:<node>`, the
//! shared tasks' lease) is gone does not count: the session may open its GET
//! stream elsewhere.
//!
//! Redis unreachable: every request that needs the session's state fails
//! with `-32603` "the shared session store is unavailable" (GET and DELETE
//! with 503); nothing is answered as if it had succeeded.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

use serde_json::{Map, Value};
use tokio::sync::mpsc;

use super::{LegacyStream, Reserve, StateKey, StoreBounds};
use crate::mux::SharedNotification;
use crate::protocol::{LogLevel, McpError, Notification};
use crate::pubsub::{BusError, BusSubscription, DeliverFuture, Inbox, InboxError, InboxSink};
use crate::runtime::SessionStreamControl;
use crate::suite::sealing::seal;
use crate::suite::tasks::SharedTasks;

/// The method of a control message to the node holding a session's GET
/// stream.
const CONTROL: &str = "genmcp/sessions/control";

/// Control messages waiting to be applied on this node.
const CONTROL_QUEUE: usize = 1_024;

/// The answer when Redis cannot be asked: session requests fail closed.
pub(crate) fn unavailable(e: &BusError) -> McpError {
    tracing::warn!(error = %e, "shared session store unavailable");
    McpError::internal("Internal error: the shared session store is unavailable; retry later")
}

/// What one request reads of its session.
#[derive(Debug, Default)]
pub(crate) struct Loaded {
    /// The session was DELETEd (on any node).
    pub(crate) deleted: bool,
    /// Its `logging/setLevel` level.
    pub(crate) level: Option<LogLevel>,
}

/// What another node asks of the one holding a session's GET stream.
#[derive(Debug)]
pub(crate) enum Control {
    /// One URI was subscribed (`true`) or unsubscribed.
    Uri {
        /// The session.
        sid: String,
        /// The resource URI.
        uri: String,
        /// `resources/subscribe`.
        subscribe: bool,
        /// Where the holder writes the outcome ([`SharedSessions::applied`]).
        ack: String,
    },
    /// The session was DELETEd: end its stream.
    Delete {
        /// The session.
        sid: String,
    },
}

/// The GET stream of a session held on this node.
struct Slot {
    generation: u64,
    owner: String,
    /// `None` while the stream is being opened.
    live: Option<LegacyStream>,
}

impl Slot {
    fn busy(&self) -> bool {
        self.live.as_ref().is_none_or(LegacyStream::alive)
    }
}

/// The sessions' state in Redis, and the GET streams this node holds: see the
/// module documentation.
pub(crate) struct SharedSessions {
    node: SharedTasks,
    bounds: StoreBounds,
    local: Mutex<HashMap<String, Slot>>,
    control: OnceLock<BusSubscription<SharedNotification>>,
}

fn session_keys(node: &SharedTasks, sid: &str) -> [String; 2] {
    [
        node.keys().key(&format!("sess:{{{sid}}}")),
        node.keys().key(&format!("sess:{{{sid}}}:uris")),
    ]
}

fn owner_keys(node: &SharedTasks, owner: &str) -> [String; 2] {
    [
        node.keys().key(&format!("sess-owner:{{{owner}}}:sids")),
        node.keys().key(&format!("sess-owner:{{{owner}}}:uris")),
    ]
}

/// The fleet's sessions with state and their URIs (one slot: the global
/// bounds, `max_session_states` and `max_subscribed_uris`, hold across every
/// node).
fn all_keys(node: &SharedTasks) -> [String; 2] {
    [
        node.keys().key("sess-all:{sessions}:sids"),
        node.keys().key("sess-all:{sessions}:uris"),
    ]
}

fn eval(script: &str, keys: &[String], args: &[String]) -> ::redis::Cmd {
    let mut cmd = ::redis::cmd("EVAL");
    cmd.arg(script).arg(keys.len());
    for k in keys {
        cmd.arg(k);
    }
    for a in args {
        cmd.arg(a);
    }
    cmd
}

/// Admits a session (and one URI member) under its owner's bounds.
/// Returns `{0, added}`, or `{1, first expiry}` / `{2, first expiry}` when
/// the owner's sessions / URIs are at their bound.
const OWNER_ADMIT: &str = r#"
local now = tonumber(ARGV[3])
local exp = tonumber(ARGV[2])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
if not redis.call('ZSCORE', KEYS[1], ARGV[1]) then
  if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[4]) then
    local first = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
    return {1, tonumber(first[2] or exp)}
  end
  redis.call('ZADD', KEYS[1], exp, ARGV[1])
end
local added = 0
if ARGV[5] ~= '' then
  redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
  if not redis.call('ZSCORE', KEYS[2], ARGV[5]) then
    if redis.call('ZCARD', KEYS[2]) >= tonumber(ARGV[6]) then
      local first = redis.call('ZRANGE', KEYS[2], 0, 0, 'WITHSCORES')
      return {2, tonumber(first[2] or exp)}
    end
    redis.call('ZADD', KEYS[2], exp, ARGV[5])
    added = 1
  end
end
for i = 1, 2 do
  local ttl = redis.call('PTTL', KEYS[i])
  if ttl ~= -2 and (ttl < 0 or now + ttl < exp) then
    redis.call('PEXPIREAT', KEYS[i], exp)
  end
end
return {0, added}
"#;

/// Sets the level unless the session was deleted; `1` when set.
const SET_LEVEL: &str = r#"
if redis.call('HGET', KEYS[1], 'd') then return 0 end
redis.call('HSET', KEYS[1], 'l', ARGV[1])
redis.call('PEXPIREAT', KEYS[1], ARGV[2])
return 1
"#;

/// Adds (`ARGV[2] == '1'`) or removes one URI: `{changed, holder, empty}`,
/// `changed` being `-1` for a deleted session and `-2` past the session's
/// bound.
const CHANGE_URI: &str = r#"
if redis.call('HGET', KEYS[1], 'd') then return {'-1', '', '0'} end
local changed = 0
if ARGV[2] == '1' then
  if redis.call('SISMEMBER', KEYS[2], ARGV[1]) == 0 then
    if redis.call('SCARD', KEYS[2]) >= tonumber(ARGV[3]) then return {'-2', '', '0'} end
    redis.call('SADD', KEYS[2], ARGV[1])
    redis.call('PEXPIREAT', KEYS[2], ARGV[4])
    changed = 1
  end
else
  changed = redis.call('SREM', KEYS[2], ARGV[1])
end
local h = redis.call('HGET', KEYS[1], 'h') or ''
local empty = '0'
if redis.call('EXISTS', KEYS[1]) == 0 and redis.call('EXISTS', KEYS[2]) == 0 then empty = '1' end
return {tostring(changed), h, empty}
"#;

/// Takes the GET stream for `ARGV[1]` when nobody holds it or its holder is
/// `ARGV[2]`: `R` (taken), `D` (deleted) or the current holder.
const RESERVE_GET: &str = r#"
if redis.call('HGET', KEYS[1], 'd') then return 'D' end
local h = redis.call('HGET', KEYS[1], 'h')
if (not h) or h == ARGV[2] then
  redis.call('HSET', KEYS[1], 'h', ARGV[1])
  redis.call('PEXPIREAT', KEYS[1], ARGV[3])
  return 'R'
end
return h
"#;

/// `1` when `ARGV[1]` still holds the GET stream of an undeleted session.
const HOLDS_GET: &str = r#"
if redis.call('HGET', KEYS[1], 'd') then return 0 end
if redis.call('HGET', KEYS[1], 'h') == ARGV[1] then return 1 end
return 0
"#;

/// Lets go of the GET stream if `ARGV[1]` holds it; `1` when the session
/// holds nothing any more.
const RELEASE_GET: &str = r#"
if redis.call('HGET', KEYS[1], 'h') == ARGV[1] then redis.call('HDEL', KEYS[1], 'h') end
if redis.call('EXISTS', KEYS[1]) == 0 and redis.call('EXISTS', KEYS[2]) == 0 then return 1 end
return 0
"#;

/// Marks the session deleted until `ARGV[1]`, dropping its level, URIs and
/// holder: `{first ('1'/'0'), holder, uris...}`.
const DELETE: &str = r#"
local first = '1'
if redis.call('HGET', KEYS[1], 'd') then first = '0' end
local h = redis.call('HGET', KEYS[1], 'h') or ''
local out = redis.call('SMEMBERS', KEYS[2])
table.insert(out, 1, h)
table.insert(out, 1, first)
redis.call('DEL', KEYS[1], KEYS[2])
redis.call('HSET', KEYS[1], 'd', '1')
redis.call('PEXPIREAT', KEYS[1], ARGV[1])
return out
"#;

/// What DELETE found.
pub(crate) struct Deleted {
    /// The GET stream held on this node, for the caller to stop.
    pub(crate) local: Option<LegacyStream>,
}

/// The member of a URI in its owner's set.
fn uri_member(sid: &str, uri: &str) -> String {
    format!("{sid} {uri}")
}

fn retry_after(first_expiry: i64) -> u64 {
    u64::try_from(first_expiry)
        .unwrap_or(0)
        .saturating_sub(seal::now_ms())
        .div_ceil(1000)
        .max(1)
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
    fn holder(&self, generation: u64) -> String {
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

    /// The session's deleted mark and level: one round trip.
    pub(crate) async fn load(&self, sid: &str) -> Result<Loaded, McpError> {
        let [hash, _] = session_keys(&self.node, sid);
        let mut cmd = ::redis::cmd("HMGET");
        cmd.arg(hash).arg("d").arg("l");
        let got: Vec<Option<String>> = self.run(cmd).await?;
        Ok(Loaded {
            deleted: got.first().is_some_and(Option::is_some),
            level: got
                .get(1)
                .and_then(Option::as_deref)
                .and_then(LogLevel::parse),
        })
    }

    /// Counts the session (and `uri`, if any) under its owner; `Ok(true)`
    /// when the URI member was new.
    async fn admit(&self, session: &StateKey<'_>, uri: Option<&str>) -> Result<bool, McpError> {
        let keys = owner_keys(&self.node, session.owner);
        let args = [
            session.sid.to_owned(),
            session.expires.to_string(),
            seal::now_ms().to_string(),
            self.bounds.per_owner_sessions.to_string(),
            uri.map(|u| uri_member(session.sid, u)).unwrap_or_default(),
            self.bounds.per_owner_uris.to_string(),
        ];
        let answer: Vec<i64> = self.run(eval(OWNER_ADMIT, &keys, &args)).await?;
        match answer.as_slice() {
            [0, added] => {
                self.admit_in_all(args).await?;
                Ok(*added == 1)
            }
            [1, first] => Err(McpError::limit_exceeded(
                "max_sessions_per_principal",
                format!(
                    "Too many sessions with state: at most {} per principal (or per client address without one); retry later",
                    self.bounds.per_owner_sessions
                ),
                retry_after(*first),
            )),
            [2, first] => Err(McpError::limit_exceeded(
                "max_subscribed_uris_per_principal",
                format!(
                    "Too many resource subscriptions: at most {} per principal (or per client address without one), across its sessions; retry later",
                    self.bounds.per_owner_uris
                ),
                retry_after(*first),
            )),
            _ => Err(McpError::internal(
                "Internal error: unexpected answer from the shared session store",
            )),
        }
    }

    /// Counts the session (and its URI member) in the fleet's sets, within
    /// the global bounds (the same script as an owner's, on the fleet's
    /// keys): past them `-32603` "Server busy", as on one node.
    async fn admit_in_all(&self, mut args: [String; 6]) -> Result<(), McpError> {
        args[3] = self.bounds.max_sessions.to_string();
        args[5] = self.bounds.max_uris.to_string();
        let keys = all_keys(&self.node);
        let answer: Vec<i64> = self.run(eval(OWNER_ADMIT, &keys, &args)).await?;
        match answer.as_slice() {
            [0, _] => Ok(()),
            [1, _] => Err(McpError::internal(
                "Server busy: too many sessions hold state; retry later",
            )),
            [2, _] => Err(McpError::internal(
                "Server busy: too many resource subscriptions; retry later",
            )),
            _ => Err(McpError::internal(
                "Internal error: unexpected answer from the shared session store",
            )),
        }
    }

    /// Removes members of the owner's sets and the fleet's (best effort: they
    /// expire anyway).
    async fn forget(&self, owner: &str, sid: Option<&str>, uris: &[String]) {
        self.forget_in(owner_keys(&self.node, owner), sid, uris)
            .await;
        self.forget_in(all_keys(&self.node), sid, uris).await;
    }

    async fn forget_in(
        &self,
        [sids_key, uris_key]: [String; 2],
        sid: Option<&str>,
        uris: &[String],
    ) {
        if !uris.is_empty() {
            let mut cmd = ::redis::cmd("ZREM");
            cmd.arg(uris_key);
            for member in uris {
                cmd.arg(member);
            }
            if let Err(e) = self.run::<i64>(cmd).await {
                tracing::debug!(error = %e, "a URI count not lowered");
            }
        }
        if let Some(sid) = sid {
            let mut cmd = ::redis::cmd("ZREM");
            cmd.arg(sids_key).arg(sid);
            if let Err(e) = self.run::<i64>(cmd).await {
                tracing::debug!(error = %e, "a session count not lowered");
            }
        }
    }

    /// Sets the session's log level, for requests on every node.
    pub(crate) async fn set_log_level(
        &self,
        session: &StateKey<'_>,
        level: LogLevel,
    ) -> Result<(), McpError> {
        self.admit(session, None).await?;
        let text = serde_json::to_value(level)
            .ok()
            .and_then(|v| v.as_str().map(str::to_owned))
            .unwrap_or_default();
        let keys = session_keys(&self.node, session.sid);
        let _: i64 = self
            .run(eval(SET_LEVEL, &keys, &[text, session.expires.to_string()]))
            .await?;
        Ok(())
    }

    /// Adds or removes one URI of the session. Returns whether the set
    /// changed and who holds its GET stream (`<node>:<n>`, empty for nobody).
    pub(crate) async fn change_uri(
        &self,
        session: &StateKey<'_>,
        uri: &str,
        subscribe: bool,
        max_per_session: usize,
    ) -> Result<(bool, String), McpError> {
        let added = if subscribe {
            self.admit(session, Some(uri)).await?
        } else {
            false
        };
        let keys = session_keys(&self.node, session.sid);
        let args = [
            uri.to_owned(),
            if subscribe { "1" } else { "0" }.to_owned(),
            max_per_session.to_string(),
            session.expires.to_string(),
        ];
        let answer: Vec<String> = self.run(eval(CHANGE_URI, &keys, &args)).await?;
        let [changed, holder, empty] = answer.as_slice() else {
            return Err(McpError::internal(
                "Internal error: unexpected answer from the shared session store",
            ));
        };
        let member = [uri_member(session.sid, uri)];
        match changed.as_str() {
            "-2" => {
                if added {
                    self.forget(session.owner, None, &member).await;
                }
                Err(McpError::invalid_params(format!(
                    "Invalid params: a session subscribes to at most {max_per_session} resources"
                )))
            }
            "-1" => {
                if added {
                    self.forget(session.owner, None, &member).await;
                }
                Ok((false, String::new()))
            }
            changed => {
                if !subscribe {
                    let sid = (empty == "1").then_some(session.sid);
                    self.forget(session.owner, sid, &member).await;
                }
                Ok((changed == "1", holder.clone()))
            }
        }
    }

    /// The session's subscribed URIs, sorted.
    pub(crate) async fn uris(&self, sid: &str) -> Result<Vec<String>, McpError> {
        let [_, set] = session_keys(&self.node, sid);
        let mut cmd = ::redis::cmd("SMEMBERS");
        cmd.arg(set);
        let mut uris: Vec<String> = self.run(cmd).await?;
        uris.sort_unstable();
        Ok(uris)
    }

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

    /// Ends the session everywhere: remembered as deleted until its token
    /// expires (every node answers 404), its level and URIs dropped, and
    /// its GET stream ended: returned when it is held here, else its node is
    /// told. Refused, like any new state, when its owner is at its bound.
    pub(crate) async fn delete(&self, session: &StateKey<'_>) -> Result<Deleted, McpError> {
        self.admit(session, None).await?;
        let keys = session_keys(&self.node, session.sid);
        let answer: Vec<String> = self
            .run(eval(DELETE, &keys, &[session.expires.to_string()]))
            .await?;
        let holder = answer.get(1).cloned().unwrap_or_default();
        let members: Vec<String> = answer
            .iter()
            .skip(2)
            .map(|u| uri_member(session.sid, u))
            .collect();
        self.forget(session.owner, None, &members).await;
        let local = self
            .lock()
            .remove(session.sid)
            .and_then(|s| s.live)
            .filter(LegacyStream::alive);
        if let Some((node, _)) = holder.rsplit_once(':')
            && node != self.node.node()
        {
            self.send(
                node,
                Control::Delete {
                    sid: session.sid.to_owned(),
                },
            )
            .await?;
        }
        Ok(Deleted { local })
    }

    /// Sends `control` to the node holding the stream (`holder` as
    /// [`Self::change_uri`] returned it). `Ok(false)` when it is held here
    /// (the caller applies it) or by nobody.
    pub(crate) async fn forward(&self, holder: &str, control: Control) -> Result<bool, McpError> {
        let Some((node, _)) = holder.rsplit_once(':') else {
            return Ok(false);
        };
        if node == self.node.node() {
            return Ok(false);
        }
        self.send(node, control).await?;
        Ok(true)
    }

    async fn send(&self, node: &str, control: Control) -> Result<(), McpError> {
        let msg = control_message(control);
        self.node
            .bus()
            .publish_remote_wait(&format!("sess-ctl/{node}"), &[msg])
            .await
            .map_err(|e| unavailable(&e))
    }

    /// A fresh name for the outcome of one forwarded change of `sid`.
    pub(crate) fn new_ack(&self, sid: &str) -> String {
        let mut bytes = [0u8; 8];
        let n = if getrandom::fill(&mut bytes).is_ok() {
            u64::from_le_bytes(bytes)
        } else {
            seal::now_ms()
        };
        format!("sess:{{{sid}}}:ack:{n:016x}")
    }

    /// The holder's side: records the outcome of a forwarded change (kept
    /// 10 s) for the node that forwarded it.
    pub(crate) async fn applied(&self, ack: &str, outcome: &Result<(), McpError>) {
        let value = match outcome {
            Ok(()) => Value::from("ok"),
            Err(e) => serde_json::json!({"code": e.code(), "message": e.to_string()}),
        };
        let expires = seal::expiry(std::time::Duration::from_secs(10));
        if let Err(e) = self
            .node
            .keys()
            .put(ack, value.to_string().as_bytes(), expires)
            .await
        {
            tracing::debug!(error = %e, "outcome of a forwarded URI change not recorded");
        }
    }

    /// The forwarding node's side: waits (at most `within`) for the holder
    /// to apply the change, so that the response follows it as on one node.
    /// `Ok` when it was applied or no outcome came in time (the change is
    /// recorded either way); the holder's error when it refused it.
    pub(crate) async fn wait_applied(
        &self,
        ack: &str,
        within: std::time::Duration,
    ) -> Result<(), McpError> {
        let until = tokio::time::Instant::now() + within;
        while tokio::time::Instant::now() < until {
            match self.node.keys().get(ack).await {
                Ok(Some(bytes)) => {
                    let value: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
                    if value == "ok" {
                        return Ok(());
                    }
                    let message = value["message"]
                        .as_str()
                        .unwrap_or("Internal error: the subscription handler refused the change")
                        .to_owned();
                    return Err(if value["code"] == -32602 {
                        McpError::invalid_params(message)
                    } else {
                        McpError::internal(message)
                    });
                }
                Ok(None) => {}
                Err(e) => return Err(unavailable(&e)),
            }
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        tracing::debug!("a forwarded URI change was not confirmed in time");
        Ok(())
    }

    /// Subscribes this node to its control topic, once: the control messages
    /// come out of the returned receiver (`None` after the first call).
    pub(crate) fn listen(&self) -> Option<mpsc::Receiver<Control>> {
        let mut rx = None;
        self.control.get_or_init(|| {
            let (tx, r) = mpsc::channel(CONTROL_QUEUE);
            rx = Some(r);
            self.node.bus().subscribe(
                format!("sess-ctl/{}", self.node.node()),
                Inbox::from_sink(Arc::new(ControlSink(tx))),
            )
        });
        rx
    }

    /// Takes the session's GET stream out of this node's table (a DELETE
    /// from another node), to stop it.
    pub(crate) fn take_live(&self, sid: &str) -> Option<LegacyStream> {
        self.lock().remove(sid).and_then(|s| s.live)
    }
}

/// The bus message carrying `control`.
fn control_message(control: Control) -> SharedNotification {
    let mut params = Map::new();
    match control {
        Control::Uri {
            sid,
            uri,
            subscribe,
            ack,
        } => {
            params.insert("sid".into(), Value::from(sid));
            params.insert("uri".into(), Value::from(uri));
            params.insert("ack".into(), Value::from(ack));
            params.insert(
                "op".into(),
                Value::from(if subscribe {
                    "subscribe"
                } else {
                    "unsubscribe"
                }),
            );
        }
        Control::Delete { sid } => {
            params.insert("sid".into(), Value::from(sid));
            params.insert("op".into(), Value::from("delete"));
        }
    }
    SharedNotification::new(Notification::new(CONTROL, params))
}

/// Queues the control messages for this node's GET streams.
struct ControlSink(mpsc::Sender<Control>);

fn parse_control(msg: &SharedNotification) -> Option<Control> {
    if msg.method() != CONTROL {
        return None;
    }
    let message: Value = serde_json::from_slice(msg.legacy()).ok()?;
    let params = message.get("params")?;
    let sid = params.get("sid")?.as_str()?.to_owned();
    let op = params.get("op")?.as_str()?;
    if op == "delete" {
        return Some(Control::Delete { sid });
    }
    let uri = params.get("uri")?.as_str()?.to_owned();
    let ack = params.get("ack")?.as_str()?.to_owned();
    Some(Control::Uri {
        sid,
        uri,
        ack,
        subscribe: match op {
            "subscribe" => true,
            "unsubscribe" => false,
            _ => return None,
        },
    })
}

impl InboxSink<SharedNotification> for ControlSink {
    fn try_deliver(&self, msg: SharedNotification) -> Result<(), InboxError> {
        if let Some(control) = parse_control(&msg)
            && let Err(e) = self.0.try_send(control)
        {
            tracing::warn!(error = %e, "session control message dropped");
            if self.0.is_closed() {
                return Err(InboxError::Closed);
            }
        }
        Ok(())
    }

    fn deliver(&self, msg: SharedNotification) -> DeliverFuture {
        let done = self.try_deliver(msg);
        Box::pin(async move { done })
    }

    fn is_closed(&self) -> bool {
        self.0.is_closed()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_messages_read_back_as_sent() {
        let sub = control_message(Control::Uri {
            sid: "s1".into(),
            uri: "note://1".into(),
            subscribe: true,
            ack: "a1".into(),
        });
        assert!(matches!(
            parse_control(&sub),
            Some(Control::Uri { sid, uri, subscribe: true, ack }) if sid == "s1" && uri == "note://1" && ack == "a1"
        ));
        let unsub = control_message(Control::Uri {
            sid: "s1".into(),
            uri: "note://1".into(),
            subscribe: false,
            ack: "a2".into(),
        });
        assert!(matches!(
            parse_control(&unsub),
            Some(Control::Uri {
                subscribe: false,
                ..
            })
        ));
        let gone = control_message(Control::Delete { sid: "s2".into() });
        assert!(matches!(parse_control(&gone), Some(Control::Delete { sid }) if sid == "s2"));
        let other = SharedNotification::new(Notification::new("x/y", Map::new()));
        assert!(parse_control(&other).is_none());
    }

    #[test]
    fn a_retry_is_at_least_a_second_away() {
        assert_eq!(retry_after(0), 1);
        let later = i64::try_from(seal::now_ms() + 10_500).unwrap_or(i64::MAX);
        assert!((10..=11).contains(&retry_after(later)));
    }
}
