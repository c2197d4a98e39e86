//! 2025-era sessions: `Mcp-Session-Id` as a sealed, expiring token, and the
//! little a session remembers beyond it, in a bounded store.
//!
//! The token is sealed with the suite's key (the one that protects cursors and
//! `requestState`, under its own purpose) over `{sid, version, capabilities,
//! clientInfo, exp}`: any replica with the key accepts it, nothing is stored
//! to validate it, and a forged or expired one is refused (404).
//!
//! What a session sets at run time (its `resources/subscribe` URIs, its
//! `logging/setLevel` level, its one GET stream, and the mark that it was
//! DELETEd) lives in [`SessionStore`]: at most `max_session_states` entries,
//! each expiring with its token, each holding at most
//! `Limits::max_resource_uris` URIs. A session that sets nothing has no entry.

use std::collections::{BTreeSet, HashMap};
use std::sync::Mutex;

use actix::Addr;
use actix::Recipient;
use serde_json::{Map, Value, json};

use crate::mux::{Assigns, Outbox};
use crate::protocol::{LogLevel, McpError, RequestMeta};
use crate::runtime::{Connection, StopStream};
use crate::suite::seal::{self, Sealer, purpose};

/// The `Mcp-Session-Id` header.
pub(crate) const SESSION_HEADER: &str = "mcp-session-id";

/// Longest `Mcp-Session-Id` accepted (longer is 404 without decoding).
const MAX_SESSION_ID_LEN: usize = 8 * 1024;

/// Largest `capabilities` + `clientInfo` kept in a session token.
const MAX_CLIENT_BYTES: usize = 4 * 1024;

/// One session, as read from its token.
#[derive(Clone, Debug)]
pub(crate) struct Session {
    /// The random session id inside the token (key of its state).
    pub(crate) sid: String,
    /// The negotiated protocol version.
    pub(crate) version: String,
    /// The client capabilities declared at `initialize`.
    pub(crate) capabilities: Map<String, Value>,
    /// The client implementation declared at `initialize`.
    pub(crate) client_info: Option<Value>,
    /// Expiry, ms since the epoch.
    pub(crate) expires: u64,
    /// The subject of the principal that initialized it, if any: only that
    /// principal may use it (any other gets 404, as for an unknown session).
    pub(crate) principal: Option<String>,
}

/// Seals a new session. `-32602` when the client's capabilities and info are
/// too large to carry in a header.
pub(crate) fn mint(
    sealer: &Sealer,
    ttl: std::time::Duration,
    version: &str,
    capabilities: Map<String, Value>,
    client_info: Option<Value>,
    principal: Option<&str>,
) -> Result<(String, Session), McpError> {
    let size = serde_json::to_vec(&capabilities).map_or(0, |v| v.len())
        + client_info
            .as_ref()
            .and_then(|i| serde_json::to_vec(i).ok())
            .map_or(0, |v| v.len());
    if size > MAX_CLIENT_BYTES {
        return Err(McpError::invalid_params(format!(
            "Invalid params: capabilities and clientInfo take {size} bytes; at most {MAX_CLIENT_BYTES} are kept for a session"
        )));
    }
    let sid = format!("{:016x}{:016x}", sealer.nonce(), sealer.nonce());
    let expires = seal::expiry(ttl);
    let payload = json!({
        "sid": sid,
        "v": version,
        "c": capabilities,
        "i": client_info,
        "exp": expires,
        "p": principal,
    });
    let token = sealer.seal(purpose::SESSION, &payload);
    Ok((
        token,
        Session {
            sid,
            version: version.to_owned(),
            capabilities,
            client_info,
            expires,
            principal: principal.map(str::to_owned),
        },
    ))
}

/// Opens a session token: `None` if forged, malformed or expired.
pub(crate) fn open(sealer: &Sealer, token: &str) -> Option<Session> {
    if token.len() > MAX_SESSION_ID_LEN {
        return None;
    }
    let payload = sealer.open(purpose::SESSION, token)?;
    let expires = payload.get("exp")?.as_u64()?;
    if seal::expired(expires) {
        return None;
    }
    Some(Session {
        sid: payload.get("sid")?.as_str()?.to_owned(),
        version: payload.get("v")?.as_str()?.to_owned(),
        capabilities: payload.get("c")?.as_object()?.clone(),
        client_info: payload.get("i").filter(|i| i.is_object()).cloned(),
        expires,
        principal: payload.get("p").and_then(Value::as_str).map(str::to_owned),
    })
}

/// The live GET stream of a session.
#[derive(Clone)]
pub(crate) struct LiveGet {
    /// Its supervising connection (alive while the GET response is).
    pub(crate) connection: Addr<Connection>,
    /// The outbox its SSE body drains (a restarted stream writes there too).
    pub(crate) outbox: Outbox,
    /// The stream actor now running.
    pub(crate) stop: Recipient<StopStream>,
    /// What the stream was opened with.
    pub(crate) meta: RequestMeta,
    /// The assigns of the GET.
    pub(crate) assigns: Assigns,
}

impl LiveGet {
    fn alive(&self) -> bool {
        self.connection.connected()
    }
}

struct GetSlot {
    generation: u64,
    /// `None` while the stream is being opened.
    live: Option<LiveGet>,
}

impl GetSlot {
    fn busy(&self) -> bool {
        self.live.as_ref().is_none_or(LiveGet::alive)
    }
}

#[derive(Default)]
struct Entry {
    expires: u64,
    deleted: bool,
    log_level: Option<LogLevel>,
    uris: BTreeSet<String>,
    get: Option<GetSlot>,
}

impl Entry {
    /// Whether the entry still holds anything worth keeping.
    fn useful(&self) -> bool {
        !seal::expired(self.expires)
            && (self.deleted
                || self.log_level.is_some()
                || !self.uris.is_empty()
                || self.get.as_ref().is_some_and(GetSlot::busy))
    }
}

/// What sessions remember, bounded: see the module documentation.
pub(crate) struct SessionStore {
    max: usize,
    entries: Mutex<HashMap<String, Entry>>,
}

fn too_many() -> McpError {
    McpError::internal("Server busy: too many sessions hold state; retry later")
}

impl SessionStore {
    pub(crate) fn new(max: usize) -> Self {
        SessionStore {
            max: max.max(1),
            entries: Mutex::new(HashMap::new()),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Entry>> {
        self.entries.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Runs `f` on the session's entry, creating it if there is room (expired
    /// and empty entries are swept first when the store is full).
    fn with_entry<R>(
        &self,
        session: &Session,
        evict: bool,
        f: impl FnOnce(&mut Entry) -> R,
    ) -> Result<R, McpError> {
        let mut entries = self.lock();
        if !entries.contains_key(&session.sid) && entries.len() >= self.max {
            entries.retain(|_, e| e.useful());
            if entries.len() >= self.max {
                if !evict {
                    return Err(too_many());
                }
                // A DELETE must be remembered: drop the entry nearest its end.
                let oldest = entries
                    .iter()
                    .min_by_key(|(_, e)| e.expires)
                    .map(|(k, _)| k.clone());
                if let Some(key) = oldest {
                    entries.remove(&key);
                }
            }
        }
        let entry = entries.entry(session.sid.clone()).or_default();
        entry.expires = session.expires;
        Ok(f(entry))
    }

    /// Whether the session was ended with DELETE.
    pub(crate) fn is_deleted(&self, session: &Session) -> bool {
        self.lock().get(&session.sid).is_some_and(|e| e.deleted)
    }

    /// The session's `logging/setLevel` level.
    pub(crate) fn log_level(&self, session: &Session) -> Option<LogLevel> {
        self.lock().get(&session.sid).and_then(|e| e.log_level)
    }

    /// Sets the session's log level.
    pub(crate) fn set_log_level(&self, session: &Session, level: LogLevel) -> Result<(), McpError> {
        self.with_entry(session, false, |e| e.log_level = Some(level))
    }

    /// The session's subscribed URIs, sorted.
    pub(crate) fn uris(&self, session: &Session) -> Vec<String> {
        self.lock()
            .get(&session.sid)
            .map(|e| e.uris.iter().cloned().collect())
            .unwrap_or_default()
    }

    /// Adds (`subscribe`) or removes a URI; at most `max_uris` per session
    /// (`-32602` past it). Returns the live GET stream to restart, if the set
    /// changed and one is open.
    pub(crate) fn change_uri(
        &self,
        session: &Session,
        uri: &str,
        subscribe: bool,
        max_uris: usize,
    ) -> Result<Option<LiveGet>, McpError> {
        self.with_entry(session, false, |e| {
            let changed = if subscribe {
                if !e.uris.contains(uri) && e.uris.len() >= max_uris {
                    return Err(McpError::invalid_params(format!(
                        "Invalid params: a session subscribes to at most {max_uris} resources"
                    )));
                }
                e.uris.insert(uri.to_owned())
            } else {
                e.uris.remove(uri)
            };
            Ok(changed
                .then(|| e.get.as_ref().and_then(|g| g.live.clone()))
                .flatten()
                .filter(LiveGet::alive))
        })?
    }

    /// Replaces the stream actor of the session's live GET (after a restart);
    /// returns the one it replaced, to stop. `None` if the GET went away
    /// meanwhile (then `stop` is returned so the caller stops the new one).
    pub(crate) fn swap_get_stream(
        &self,
        session: &Session,
        connection: &Addr<Connection>,
        stop: Recipient<StopStream>,
    ) -> Recipient<StopStream> {
        let mut entries = self.lock();
        match entries
            .get_mut(&session.sid)
            .and_then(|e| e.get.as_mut())
            .and_then(|g| g.live.as_mut())
            .filter(|live| live.connection == *connection)
        {
            Some(live) => std::mem::replace(&mut live.stop, stop),
            None => stop,
        }
    }

    /// Reserves the session's one GET stream: `Ok(None)` if one is open or
    /// opening (the caller answers 409).
    pub(crate) fn reserve_get(
        &self,
        session: &Session,
        generation: u64,
    ) -> Result<Option<u64>, McpError> {
        self.with_entry(session, false, |e| {
            if e.get.as_ref().is_some_and(GetSlot::busy) {
                return None;
            }
            e.get = Some(GetSlot {
                generation,
                live: None,
            });
            Some(generation)
        })
    }

    /// Records the opened GET stream of reservation `generation`.
    pub(crate) fn commit_get(&self, session: &Session, generation: u64, live: LiveGet) {
        if let Some(slot) = self
            .lock()
            .get_mut(&session.sid)
            .and_then(|e| e.get.as_mut())
            .filter(|g| g.generation == generation)
        {
            slot.live = Some(live);
        }
    }

    /// Frees reservation `generation` if its stream never opened.
    pub(crate) fn release_get(&self, session: &Session, generation: u64) {
        let mut entries = self.lock();
        if let Some(e) = entries.get_mut(&session.sid)
            && e.get
                .as_ref()
                .is_some_and(|g| g.generation == generation && g.live.is_none())
        {
            e.get = None;
        }
    }

    /// Ends the session: it is remembered as deleted until its token expires
    /// (so it answers 404), its state is dropped, and its GET stream, if any, is
    /// returned for the caller to stop. `false` if it was already deleted.
    pub(crate) fn delete(&self, session: &Session) -> (bool, Option<LiveGet>) {
        self.with_entry(session, true, |e| {
            let first = !e.deleted;
            e.deleted = true;
            e.log_level = None;
            e.uris.clear();
            (first, e.get.take().and_then(|g| g.live))
        })
        .unwrap_or((true, None))
    }
}

/// Frees a GET reservation unless the stream opened (a GET whose client left
/// while its stream was being set up).
pub(crate) struct Reservation<'a> {
    pub(crate) store: &'a SessionStore,
    pub(crate) session: &'a Session,
    pub(crate) generation: u64,
}

impl Drop for Reservation<'_> {
    fn drop(&mut self) {
        self.store.release_get(self.session, self.generation);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn tokens_open_only_unchanged_and_unexpired() {
        let sealer = Sealer::new([4; 32]);
        let (token, s) = mint(
            &sealer,
            Duration::from_secs(60),
            "2025-11-25",
            Map::new(),
            None,
            None,
        )
        .unwrap();
        assert!(token.bytes().all(|b| (0x21..=0x7e).contains(&b)));
        let opened = open(&sealer, &token).unwrap();
        assert_eq!(opened.sid, s.sid);
        assert_eq!(opened.version, "2025-11-25");
        assert!(open(&sealer, &format!("{token}x")).is_none());
        assert!(open(&Sealer::new([5; 32]), &token).is_none());
        let (expired, _) = mint(
            &sealer,
            Duration::ZERO,
            "2025-11-25",
            Map::new(),
            None,
            None,
        )
        .unwrap();
        assert!(open(&sealer, &expired).is_none());
    }

    #[test]
    fn the_store_is_bounded() {
        let sealer = Sealer::new([4; 32]);
        let store = SessionStore::new(2);
        let sessions: Vec<Session> = (0..3)
            .map(|_| {
                mint(
                    &sealer,
                    Duration::from_secs(60),
                    "2025-11-25",
                    Map::new(),
                    None,
                    None,
                )
                .unwrap()
                .1
            })
            .collect();
        store.set_log_level(&sessions[0], LogLevel::Info).unwrap();
        store.change_uri(&sessions[1], "a://x", true, 4).unwrap();
        assert!(store.set_log_level(&sessions[2], LogLevel::Info).is_err());
        // A DELETE is always remembered, evicting the oldest entry if needed.
        store.delete(&sessions[2]);
        assert!(store.is_deleted(&sessions[2]));
        assert_eq!(store.lock().len(), 2);
        let other = SessionStore::new(4);
        other.change_uri(&sessions[0], "a://x", true, 1).unwrap();
        assert!(other.change_uri(&sessions[0], "a://y", true, 1).is_err());
        assert_eq!(other.uris(&sessions[0]), vec!["a://x".to_owned()]);
    }
}
