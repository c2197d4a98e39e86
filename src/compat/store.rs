//! What 2025-era sessions remember beyond their token, bounded per principal.
//!
//! A session that sets nothing has no entry. An entry holds the session's
//! `logging/setLevel` level, its `resources/subscribe` URIs, its one GET
//! stream, or the mark that it was DELETEd; it lives until the session's token
//! expires. Entries are counted under their *owner* (the principal of the
//! request that created the entry, or its client address without one):
//!
//! - an owner holds at most [`StoreBounds::per_owner_sessions`] entries and
//!   [`StoreBounds::per_owner_uris`] URIs across them; past either, that
//!   owner gets [`McpError::LimitExceeded`] (HTTP 429 with `Retry-After`) and
//!   nobody else is affected;
//! - the whole store holds at most [`StoreBounds::max_sessions`] entries and
//!   [`StoreBounds::max_uris`] URIs (the memory bound; reaching it takes
//!   many owners): past it, `-32603` "Server busy";
//! - when a bound is reached, entries that expired or hold nothing any more
//!   (no level, no URI, no open GET) are swept first: the owner's own for its
//!   bound, everyone's for the global one. Nothing else is ever evicted: a
//!   DELETE that cannot be recorded is refused instead, so a deleted session
//!   is never served again.
//!
//! Each operation is O(1) (hash maps and counters; a session's own URI set is
//! a [`SessionState`]) except a sweep, which runs only when a bound is
//! reached. Nothing here knows HTTP: the HTTP transport keeps its sessions
//! here, keyed by [`StateKey`], with their GET stream as a [`LegacyStream`].

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard};

use super::{LegacyStream, SessionState};
use crate::protocol::{LogLevel, McpError};
use crate::runtime::SessionStreamControl;
use crate::suite::sealing::seal;

/// Which session an operation is about, and under whom its state counts.
#[derive(Clone, Copy, Debug)]
pub(crate) struct StateKey<'a> {
    /// The session id (the key of its entry).
    pub(crate) sid: &'a str,
    /// Who the entry is counted under: the principal of the request, or its
    /// client address without one.
    pub(crate) owner: &'a str,
    /// When the session expires, ms since the epoch (the entry lives until
    /// then).
    pub(crate) expires: u64,
}

/// The bounds of a [`SessionStore`] (from the HTTP `CompatConfig`).
#[derive(Clone, Copy, Debug)]
pub(crate) struct StoreBounds {
    /// Entries in the whole store.
    pub(crate) max_sessions: usize,
    /// Subscribed URIs in the whole store.
    pub(crate) max_uris: usize,
    /// Entries of one owner.
    pub(crate) per_owner_sessions: usize,
    /// Subscribed URIs of one owner, across its sessions.
    pub(crate) per_owner_uris: usize,
}

struct GetSlot {
    generation: u64,
    /// `None` while the stream is being opened.
    live: Option<LegacyStream>,
}

impl GetSlot {
    fn busy(&self) -> bool {
        self.live.as_ref().is_none_or(LegacyStream::alive)
    }
}

struct Entry {
    owner: Arc<str>,
    expires: u64,
    deleted: bool,
    state: SessionState,
    get: Option<GetSlot>,
}

impl Entry {
    /// Whether the entry still holds anything worth keeping.
    fn useful(&self) -> bool {
        !seal::expired(self.expires)
            && (self.deleted
                || self.state.log_level.is_some()
                || self.state.uri_count() > 0
                || self.get.as_ref().is_some_and(GetSlot::busy))
    }
}

#[derive(Default)]
struct Owner {
    sids: HashSet<String>,
    uris: usize,
}

#[derive(Default)]
struct Inner {
    entries: HashMap<String, Entry>,
    owners: HashMap<Arc<str>, Owner>,
    uris: usize,
}

impl Inner {
    fn remove(&mut self, sid: &str) {
        let Some(entry) = self.entries.remove(sid) else {
            return;
        };
        let uris = entry.state.uri_count();
        self.uris -= uris;
        if let Some(owner) = self.owners.get_mut(&entry.owner) {
            owner.sids.remove(sid);
            owner.uris -= uris;
            if owner.sids.is_empty() {
                self.owners.remove(&entry.owner);
            }
        }
    }

    /// Drops the entries of `owner` (all owners when `None`) that hold
    /// nothing any more.
    fn sweep(&mut self, owner: Option<&str>) {
        let stale: Vec<String> = match owner {
            Some(owner) => self.owners.get(owner).map_or_else(Vec::new, |o| {
                o.sids
                    .iter()
                    .filter(|sid| self.entries.get(*sid).is_none_or(|e| !e.useful()))
                    .cloned()
                    .collect()
            }),
            None => self
                .entries
                .iter()
                .filter(|(_, e)| !e.useful())
                .map(|(sid, _)| sid.clone())
                .collect(),
        };
        for sid in stale {
            self.remove(&sid);
        }
    }

    /// Seconds until the first entry of `owner` expires (at least 1): when a
    /// refused owner may retry at the latest.
    fn retry_after(&self, owner: &str) -> u64 {
        let now = seal::now_ms();
        self.owners
            .get(owner)
            .and_then(|o| {
                o.sids
                    .iter()
                    .filter_map(|sid| self.entries.get(sid))
                    .map(|e| e.expires)
                    .min()
            })
            .map_or(1, |first| first.saturating_sub(now).div_ceil(1000).max(1))
    }

    /// The session's entry, created if its owner and the store have room.
    fn entry(&mut self, session: &StateKey, bounds: &StoreBounds) -> Result<&mut Entry, McpError> {
        if !self.entries.contains_key(session.sid) {
            let owner = session.owner;
            let held = |inner: &Inner| inner.owners.get(owner).map_or(0, |o| o.sids.len());
            if held(self) >= bounds.per_owner_sessions {
                self.sweep(Some(owner));
                if held(self) >= bounds.per_owner_sessions {
                    return Err(McpError::limit_exceeded(
                        "max_sessions_per_principal",
                        format!(
                            "Too many sessions with state: at most {} per principal (or per client address without one); retry later",
                            bounds.per_owner_sessions
                        ),
                        self.retry_after(owner),
                    ));
                }
            }
            if self.entries.len() >= bounds.max_sessions {
                self.sweep(None);
                if self.entries.len() >= bounds.max_sessions {
                    return Err(McpError::internal(
                        "Server busy: too many sessions hold state; retry later",
                    ));
                }
            }
            let key: Arc<str> = match self.owners.get_key_value(owner) {
                Some((k, _)) => k.clone(),
                None => Arc::from(owner),
            };
            self.owners
                .entry(key.clone())
                .or_default()
                .sids
                .insert(session.sid.to_owned());
            self.entries.insert(
                session.sid.to_owned(),
                Entry {
                    owner: key,
                    expires: session.expires,
                    deleted: false,
                    state: SessionState::default(),
                    get: None,
                },
            );
        }
        self.entries
            .get_mut(session.sid)
            .ok_or_else(|| McpError::internal("Internal error: session state lost"))
    }

    /// Adds a URI to the session's set, within every bound. `Ok(false)` when
    /// it was there already.
    fn add_uri(
        &mut self,
        session: &StateKey,
        uri: &str,
        max_per_session: usize,
        bounds: &StoreBounds,
    ) -> Result<bool, McpError> {
        let owner_uris = {
            let entry = self.entry(session, bounds)?;
            if !entry.state.can_add(uri, max_per_session)? {
                return Ok(false);
            }
            let owner = entry.owner.clone();
            self.owners.get(&owner).map_or(0, |o| o.uris)
        };
        if owner_uris >= bounds.per_owner_uris {
            return Err(McpError::limit_exceeded(
                "max_subscribed_uris_per_principal",
                format!(
                    "Too many resource subscriptions: at most {} per principal (or per client address without one), across its sessions; retry later",
                    bounds.per_owner_uris
                ),
                self.retry_after(session.owner),
            ));
        }
        if self.uris >= bounds.max_uris {
            return Err(McpError::internal(
                "Server busy: too many resource subscriptions; retry later",
            ));
        }
        let Some(entry) = self.entries.get_mut(session.sid) else {
            return Ok(false);
        };
        if !entry.state.change_uri(uri, true, max_per_session)? {
            return Ok(false);
        }
        if let Some(owner) = self.owners.get_mut(&entry.owner) {
            owner.uris += 1;
        }
        self.uris += 1;
        Ok(true)
    }

    /// Removes a URI from the session's set; `false` when it was not there.
    fn remove_uri(&mut self, session: &StateKey, uri: &str) -> bool {
        let Some(entry) = self.entries.get_mut(session.sid) else {
            return false;
        };
        if !matches!(entry.state.change_uri(uri, false, 0), Ok(true)) {
            return false;
        }
        if let Some(owner) = self.owners.get_mut(&entry.owner) {
            owner.uris -= 1;
        }
        self.uris -= 1;
        true
    }
}

/// What reserving a session's GET stream found.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Reserve {
    /// The caller opens the stream and commits it.
    Reserved,
    /// A GET stream is open or opening (409).
    Busy,
    /// The session was deleted meanwhile (404).
    Deleted,
}

/// What sessions remember, bounded: see the module documentation.
pub(crate) struct SessionStore {
    bounds: StoreBounds,
    inner: Mutex<Inner>,
}

impl SessionStore {
    pub(crate) fn new(bounds: StoreBounds) -> Self {
        SessionStore {
            bounds: StoreBounds {
                max_sessions: bounds.max_sessions.max(1),
                max_uris: bounds.max_uris.max(1),
                per_owner_sessions: bounds.per_owner_sessions.max(1),
                per_owner_uris: bounds.per_owner_uris.max(1),
            },
            inner: Mutex::new(Inner::default()),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Whether the session was ended with DELETE.
    pub(crate) fn is_deleted(&self, session: &StateKey) -> bool {
        self.lock()
            .entries
            .get(session.sid)
            .is_some_and(|e| e.deleted)
    }

    /// The session's `logging/setLevel` level.
    pub(crate) fn log_level(&self, session: &StateKey) -> Option<LogLevel> {
        self.lock()
            .entries
            .get(session.sid)
            .and_then(|e| e.state.log_level)
    }

    /// Sets the session's log level.
    pub(crate) fn set_log_level(
        &self,
        session: &StateKey,
        level: LogLevel,
    ) -> Result<(), McpError> {
        let mut inner = self.lock();
        inner.entry(session, &self.bounds)?.state.log_level = Some(level);
        Ok(())
    }

    /// The session's subscribed URIs, sorted.
    pub(crate) fn uris(&self, session: &StateKey) -> Vec<String> {
        self.lock()
            .entries
            .get(session.sid)
            .map(|e| e.state.uris())
            .unwrap_or_default()
    }

    /// Adds (`subscribe`) or removes a URI: O(1) in the store. At most
    /// `max_per_session` per session (`-32602` past it), and the owner's and
    /// the store's bounds. Returns whether the set changed, and the live GET
    /// stream to restart if it did and one is open.
    pub(crate) fn change_uri(
        &self,
        session: &StateKey,
        uri: &str,
        subscribe: bool,
        max_per_session: usize,
    ) -> Result<(bool, Option<LegacyStream>), McpError> {
        let mut inner = self.lock();
        let changed = if subscribe {
            inner.add_uri(session, uri, max_per_session, &self.bounds)?
        } else {
            inner.remove_uri(session, uri)
        };
        let live = inner
            .entries
            .get(session.sid)
            .filter(|_| changed)
            .and_then(|e| e.get.as_ref())
            .and_then(|g| g.live.clone())
            .filter(LegacyStream::alive);
        Ok((changed, live))
    }

    /// Installs a restarted stream actor in the session's live GET stream
    /// `live`; returns the one it replaced, to stop. If that GET went away
    /// meanwhile (or the session was deleted), `stop` itself is returned so
    /// the caller stops the new one.
    pub(crate) fn swap_get_stream(
        &self,
        session: &StateKey,
        live: &LegacyStream,
        stop: SessionStreamControl,
    ) -> Option<SessionStreamControl> {
        let mut inner = self.lock();
        match inner
            .entries
            .get_mut(session.sid)
            .filter(|e| !e.deleted)
            .and_then(|e| e.get.as_mut())
            .and_then(|g| g.live.as_mut())
            .filter(|l| l.connection() == live.connection())
        {
            Some(l) => l.install(stop),
            None => Some(stop),
        }
    }

    /// Reserves the session's one GET stream for reservation `generation`.
    pub(crate) fn reserve_get(
        &self,
        session: &StateKey,
        generation: u64,
    ) -> Result<Reserve, McpError> {
        let mut inner = self.lock();
        let entry = inner.entry(session, &self.bounds)?;
        if entry.deleted {
            return Ok(Reserve::Deleted);
        }
        if entry.get.as_ref().is_some_and(GetSlot::busy) {
            return Ok(Reserve::Busy);
        }
        entry.get = Some(GetSlot {
            generation,
            live: None,
        });
        Ok(Reserve::Reserved)
    }

    /// Records the opened GET stream of reservation `generation`. `false` when
    /// the reservation is gone (the session was deleted meanwhile): the caller
    /// stops the stream it opened, which must not outlive the DELETE.
    #[must_use]
    pub(crate) fn commit_get(
        &self,
        session: &StateKey,
        generation: u64,
        live: LegacyStream,
    ) -> bool {
        let mut inner = self.lock();
        match inner
            .entries
            .get_mut(session.sid)
            .filter(|e| !e.deleted)
            .and_then(|e| e.get.as_mut())
            .filter(|g| g.generation == generation && g.live.is_none())
        {
            Some(slot) => {
                slot.live = Some(live);
                true
            }
            None => false,
        }
    }

    /// Frees reservation `generation` if its stream never opened.
    pub(crate) fn release_get(&self, session: &StateKey, generation: u64) {
        let mut inner = self.lock();
        if let Some(e) = inner.entries.get_mut(session.sid)
            && e.get
                .as_ref()
                .is_some_and(|g| g.generation == generation && g.live.is_none())
        {
            e.get = None;
        }
    }

    /// Ends the session: it is remembered as deleted until its token expires
    /// (so it answers 404), its level and URIs are dropped, and its GET stream,
    /// if any, is returned for the caller to stop (a GET still opening finds
    /// its reservation gone and stops its own). `Ok(false)` if it was already
    /// deleted. Refused, like any new state, when its owner or the store is
    /// full: a DELETE never evicts anything.
    pub(crate) fn delete(
        &self,
        session: &StateKey,
    ) -> Result<(bool, Option<LegacyStream>), McpError> {
        let mut inner = self.lock();
        let entry = inner.entry(session, &self.bounds)?;
        let first = !entry.deleted;
        entry.deleted = true;
        entry.state.log_level = None;
        let dropped = entry.state.clear_uris();
        let live = entry.get.take().and_then(|g| g.live);
        let owner = entry.owner.clone();
        if let Some(o) = inner.owners.get_mut(&owner) {
            o.uris -= dropped;
        }
        inner.uris -= dropped;
        Ok((first, live))
    }

    /// Entries and URIs held by `owner` (tests).
    #[cfg(test)]
    fn held_by(&self, owner: &str) -> (usize, usize) {
        self.lock()
            .owners
            .get(owner)
            .map_or((0, 0), |o| (o.sids.len(), o.uris))
    }
}

/// Frees a GET reservation unless the stream opened (a GET whose client left
/// while its stream was being set up).
pub(crate) struct Reservation<'a> {
    /// The store holding the reservation.
    pub(crate) store: &'a SessionStore,
    /// The session reserving its GET stream.
    pub(crate) session: StateKey<'a>,
    /// The reservation.
    pub(crate) generation: u64,
}

impl Drop for Reservation<'_> {
    fn drop(&mut self) {
        self.store.release_get(&self.session, self.generation);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// A session of `owner`, its id unique and its expiry a minute away.
    fn session(owner: &'static str) -> StateKey<'static> {
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        StateKey {
            sid: Box::leak(format!("s{n}").into_boxed_str()),
            owner,
            expires: seal::expiry(Duration::from_secs(60)),
        }
    }

    fn bounds() -> StoreBounds {
        StoreBounds {
            max_sessions: 8,
            max_uris: 100,
            per_owner_sessions: 2,
            per_owner_uris: 3,
        }
    }

    #[test]
    fn one_owner_at_its_bound_leaves_the_others_alone() {
        let store = SessionStore::new(bounds());
        let a: Vec<StateKey> = (0..3).map(|_| session("a")).collect();
        store.set_log_level(&a[0], LogLevel::Info).unwrap();
        store.change_uri(&a[1], "x://1", true, 10).unwrap();
        let refused = store.set_log_level(&a[2], LogLevel::Info).unwrap_err();
        assert!(refused.retry_after().is_some());
        // Its DELETE is refused too, never evicting anything.
        assert!(store.delete(&a[2]).is_err());
        assert!(!store.is_deleted(&a[2]));
        let b = session("b");
        store.set_log_level(&b, LogLevel::Info).unwrap();
        store.delete(&b).unwrap();
        assert!(store.is_deleted(&b));
        assert_eq!(store.log_level(&a[0]), Some(LogLevel::Info));
        // URIs are counted across the owner's sessions.
        store.change_uri(&a[1], "x://2", true, 10).unwrap();
        store.change_uri(&a[0], "x://3", true, 10).unwrap();
        let Err(over) = store.change_uri(&a[0], "x://4", true, 10) else {
            panic!("the owner is at its URI bound");
        };
        assert!(over.retry_after().is_some());
        assert_eq!(store.held_by("a"), (2, 3));
        // Unsubscribing frees room; deleting drops the session's URIs.
        assert!(store.change_uri(&a[1], "x://1", false, 10).unwrap().0);
        store.change_uri(&a[0], "x://4", true, 10).unwrap();
        store.delete(&a[0]).unwrap();
        assert_eq!(store.held_by("a"), (2, 1));
        assert_eq!(store.lock().uris, 1);
    }

    #[test]
    fn a_get_reserved_before_a_delete_cannot_commit() {
        let store = SessionStore::new(bounds());
        let s = session("a");
        assert_eq!(store.reserve_get(&s, 1).unwrap(), Reserve::Reserved);
        assert_eq!(store.reserve_get(&s, 2).unwrap(), Reserve::Busy);
        store.delete(&s).unwrap();
        assert_eq!(store.reserve_get(&s, 3).unwrap(), Reserve::Deleted);
        assert!(store.is_deleted(&s));
    }
}
