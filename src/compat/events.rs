//! Event ids and replay for the SSE streams of 2025 sessions (resumability
//! and SSE polling, SEP-1699), kept in this process's memory.
//!
//! Every event written on a session's GET stream or on one of its POST SSE
//! responses is first appended here, under the session, the principal that
//! initialized it, and the stream (`0` is the GET stream, POST streams are
//! numbered from `1`); its SSE id, [`EventId`], is
//! `<tag>-<stream>-<seq>`: the session log's random tag, the stream, and a
//! sequence number that grows across the session's streams. A reader (the
//! body of one HTTP response) writes a stream's events from a cursor on, so a
//! client that reconnects with `Last-Event-ID` gets what came after it, then
//! the live events, in order and once.
//!
//! Bounds ([`EventBounds`]): events and bytes per session, bytes in all. Past
//! a session's bounds its own oldest events go first; past the server-wide
//! budget, the oldest events of the whole server, whichever session holds
//! them. An event larger than a bound on its own is kept alone, so a
//! connected reader still gets it.
//! A cursor older than what is kept is a [`Gap`], never a silent skip. A
//! session's log goes with the session (DELETE, expiry); a stream goes after
//! [`EventBounds::resume_window`] without a reader (a POST stream's once its
//! request ended, as a client may not have read a response written to a
//! connection that was already gone).
//!
//! Nothing here talks to Redis: the shared (Redis Streams) store plugs in
//! beside this one behind the same operations.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use bytes::Bytes;
use tokio::sync::watch;

use crate::suite::sealing::seal;

/// The stream number of a session's GET stream.
pub(crate) const GET_STREAM: u64 = 0;

/// The bounds of the event store (from the HTTP `CompatConfig`).
#[derive(Clone, Copy, Debug)]
pub(crate) struct EventBounds {
    /// Events kept per session, across its streams.
    pub(crate) per_session_events: usize,
    /// Bytes (JSON text) kept per session, across its streams.
    pub(crate) per_session_bytes: usize,
    /// Bytes kept in the whole server.
    pub(crate) total_bytes: usize,
    /// Sessions with a log at once.
    pub(crate) max_sessions: usize,
    /// How long a stream without a reader is kept for a client to resume it.
    pub(crate) resume_window: Duration,
}

/// An SSE event id: which stream of the session, and where in it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct EventId {
    /// The stream ([`GET_STREAM`] or a POST stream).
    pub(crate) stream: u64,
    /// The position: the event's sequence number (`0` before any).
    pub(crate) seq: u64,
}

/// What a `Last-Event-ID` names, for this session and principal.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Resume {
    /// An event (or the priming position) of one of the session's streams.
    At(EventId),
    /// Not an id of this session's streams: malformed, another session's or
    /// principal's, or of a log this process no longer has.
    NotOurs,
    /// An id of this session whose stream, or some event after it, is no
    /// longer kept.
    Gone,
}

/// Events after a cursor are no longer all kept.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Gap;

/// One stored event.
#[derive(Clone, Debug)]
pub(crate) struct Event {
    /// Its sequence number (the id's position).
    pub(crate) seq: u64,
    /// The JSON-RPC message's text.
    pub(crate) data: Bytes,
    /// Whether it is the response that ends its POST stream.
    pub(crate) last: bool,
}

/// What a reader finds after its cursor.
#[derive(Debug)]
pub(crate) enum Read {
    /// Events to write (at least one).
    Events(Vec<Event>),
    /// Nothing yet: wait for the stream's head to move.
    Wait,
    /// The reader is no longer the stream's (another took over, or the
    /// server closed it for polling): end with a `retry` hint.
    Superseded,
    /// The stream is gone (its session ended, or its GET stream stopped).
    Ended,
    /// The reader is past the stream's response: nothing more comes (end
    /// the body, no `retry` hint).
    Finished,
}

struct Stream {
    events: VecDeque<Event>,
    /// The last sequence number appended (its head), `0` for none.
    head: u64,
    /// The highest sequence number dropped from this stream (`0`: none).
    floor: u64,
    /// Its response was appended (a POST stream's end).
    ended: bool,
    /// The reader writing it now (`0`: none) and the latest handed out.
    reader: u64,
    /// Since when it has no reader.
    idle_since: Option<Instant>,
    /// Wakes its reader when an event is appended or it is taken over.
    wake: watch::Sender<u64>,
}

impl Stream {
    fn new() -> Self {
        Stream {
            events: VecDeque::new(),
            head: 0,
            floor: 0,
            ended: false,
            reader: 0,
            idle_since: Some(Instant::now()),
            wake: watch::channel(0).0,
        }
    }
}

struct SessionLog {
    tag: String,
    principal: Option<String>,
    expires: u64,
    seq: u64,
    next_stream: u64,
    next_reader: u64,
    streams: HashMap<u64, Stream>,
    /// Kept events' stream and position, oldest first (entries of events
    /// dropped otherwise are skipped, and compacted away).
    order: VecDeque<(u64, u64)>,
    events: usize,
    bytes: usize,
}

impl SessionLog {
    /// Drops event `seq` of `stream` if it is that stream's oldest; its
    /// size.
    fn drop_front(&mut self, stream: u64, seq: u64) -> Option<usize> {
        let s = self.streams.get_mut(&stream)?;
        if s.events.front().is_none_or(|e| e.seq != seq) {
            return None;
        }
        let e = s.events.pop_front()?;
        s.floor = seq;
        self.bytes -= e.data.len();
        self.events -= 1;
        Some(e.data.len())
    }

    /// Drops the session's oldest kept event; its size, or `None` when the
    /// session keeps nothing.
    fn drop_oldest(&mut self) -> Option<usize> {
        while let Some((stream, seq)) = self.order.pop_front() {
            if let Some(len) = self.drop_front(stream, seq) {
                return Some(len);
            }
        }
        None
    }

    /// Whether event `seq` of `stream` is kept.
    fn keeps(&self, stream: u64, seq: u64) -> bool {
        self.streams
            .get(&stream)
            .is_some_and(|s| s.events.binary_search_by_key(&seq, |e| e.seq).is_ok())
    }

    /// Drops `stream`; the events and bytes it kept.
    fn remove_stream(&mut self, stream: u64) -> (usize, usize) {
        let Some(s) = self.streams.remove(&stream) else {
            return (0, 0);
        };
        let freed: usize = s.events.iter().map(|e| e.data.len()).sum();
        self.bytes -= freed;
        self.events -= s.events.len();
        (s.events.len(), freed)
    }

    /// Forgets the order entries of events no longer kept, once they
    /// outnumber the kept ones.
    fn compact(&mut self) {
        if self.order.len() > 2 * self.events + 64 {
            let order = std::mem::take(&mut self.order);
            self.order = order
                .into_iter()
                .filter(|(stream, seq)| self.keeps(*stream, *seq))
                .collect();
        }
    }
}

#[derive(Default)]
struct Inner {
    sessions: HashMap<Arc<str>, SessionLog>,
    /// Every kept event's session, stream and position, oldest first (as
    /// each session's `order`).
    order: VecDeque<(Arc<str>, u64, u64)>,
    bytes: usize,
    events: usize,
    swept: Option<Instant>,
    /// When a search for a log to make room found none (searched again a
    /// second later at the earliest).
    full: Option<Instant>,
}

impl Inner {
    fn sweep(&mut self) {
        let now = Instant::now();
        if self
            .swept
            .is_some_and(|t| now.duration_since(t) < Duration::from_secs(1))
        {
            return;
        }
        self.swept = Some(now);
        let expired: Vec<Arc<str>> = self
            .sessions
            .iter()
            .filter(|(_, l)| seal::expired(l.expires))
            .map(|(sid, _)| sid.clone())
            .collect();
        for sid in expired {
            self.remove_session(&sid);
        }
    }

    /// At the log cap: drops the log with no stream left that expires
    /// first (an id of it is then not of this session: 400); whether one
    /// was. Searched at most once a second while none is found.
    fn evict_empty(&mut self) -> bool {
        if self
            .full
            .is_some_and(|t| t.elapsed() < Duration::from_secs(1))
        {
            return false;
        }
        let empty = self
            .sessions
            .iter()
            .filter(|(_, l)| l.streams.is_empty())
            .min_by_key(|(_, l)| l.expires)
            .map(|(sid, _)| sid.clone());
        match empty {
            Some(sid) => {
                self.remove_session(&sid);
                true
            }
            None => {
                self.full = Some(Instant::now());
                false
            }
        }
    }

    fn remove_session(&mut self, sid: &str) {
        if let Some(log) = self.sessions.remove(sid) {
            self.bytes -= log.bytes;
            self.events -= log.events;
        }
        self.compact();
    }

    /// Drops the oldest event kept in the whole store; whether one was.
    fn drop_oldest(&mut self) -> bool {
        while let Some((sid, stream, seq)) = self.order.pop_front() {
            if let Some(len) = self
                .sessions
                .get_mut(&sid)
                .and_then(|l| l.drop_front(stream, seq))
            {
                self.bytes -= len;
                self.events -= 1;
                return true;
            }
        }
        false
    }

    fn compact(&mut self) {
        if self.order.len() > 2 * self.events + 1024 {
            let order = std::mem::take(&mut self.order);
            let sessions = &self.sessions;
            self.order = order
                .into_iter()
                .filter(|(sid, stream, seq)| {
                    sessions.get(sid).is_some_and(|l| l.keeps(*stream, *seq))
                })
                .collect();
        }
    }
}

/// The event logs of this process's 2025 sessions: see the module
/// documentation.
pub(crate) struct EventStore {
    bounds: EventBounds,
    inner: Mutex<Inner>,
}

/// The session a store operation is about, and the principal its log is
/// keyed with.
#[derive(Clone, Copy, Debug)]
pub(crate) struct LogKey<'a> {
    /// The session id.
    pub(crate) sid: &'a str,
    /// The subject of the principal that initialized it, if any.
    pub(crate) principal: Option<&'a str>,
    /// When the session expires, ms since the epoch.
    pub(crate) expires: u64,
}

impl EventStore {
    /// An empty store within `bounds`.
    pub(crate) fn new(bounds: EventBounds) -> Self {
        EventStore {
            bounds: EventBounds {
                per_session_events: bounds.per_session_events.max(1),
                per_session_bytes: bounds.per_session_bytes.max(1),
                total_bytes: bounds.total_bytes.max(1),
                max_sessions: bounds.max_sessions.max(1),
                resume_window: bounds.resume_window,
            },
            inner: Mutex::new(Inner::default()),
        }
    }

    /// The bounds in force.
    pub(crate) fn bounds(&self) -> &EventBounds {
        &self.bounds
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The session's log, `None` for another principal's.
    fn log<'a>(inner: &'a mut Inner, key: &LogKey) -> Option<&'a mut SessionLog> {
        inner
            .sessions
            .get_mut(key.sid)
            .filter(|l| l.principal.as_deref() == key.principal)
    }

    /// Opens stream `stream` of the session ([`GET_STREAM`]) or, with
    /// `None`, a new POST stream; makes the session's log with `tag` if it
    /// has none. Returns the stream's number and the log's tag, or `None`
    /// when the store holds [`EventBounds::max_sessions`] logs, or the
    /// session holds [`EventBounds::per_session_events`] streams none of
    /// which has ended unread, or (a GET stream) the session's previous GET
    /// stream is still kept (see [`EventStore::until_dropped`]): the stream
    /// is then served without ids.
    pub(crate) fn open(
        &self,
        key: &LogKey,
        stream: Option<u64>,
        tag: String,
    ) -> Option<(u64, String)> {
        let mut inner = self.lock();
        inner.sweep();
        if !inner.sessions.contains_key(key.sid) {
            if inner.sessions.len() >= self.bounds.max_sessions && !inner.evict_empty() {
                return None;
            }
            inner.sessions.insert(
                Arc::from(key.sid),
                SessionLog {
                    tag,
                    principal: key.principal.map(str::to_owned),
                    expires: key.expires,
                    seq: 0,
                    next_stream: GET_STREAM + 1,
                    next_reader: 0,
                    streams: HashMap::new(),
                    order: VecDeque::new(),
                    events: 0,
                    bytes: 0,
                },
            );
        }
        let max_streams = self.bounds.per_session_events;
        let log = Self::log(&mut inner, key)?;
        let number = match stream {
            Some(n) => n,
            None => {
                // At most as many streams as events per session: the oldest
                // ended stream nobody reads goes first, else no ids.
                if log.streams.len() >= max_streams {
                    let oldest = log
                        .streams
                        .iter()
                        .filter(|(n, s)| **n != GET_STREAM && s.ended && s.reader == 0)
                        .map(|(n, _)| *n)
                        .min()?;
                    let (events, bytes) = log.remove_stream(oldest);
                    log.compact();
                    inner.events -= events;
                    inner.bytes -= bytes;
                    inner.compact();
                }
                let log = Self::log(&mut inner, key)?;
                let n = log.next_stream;
                log.next_stream += 1;
                n
            }
        };
        let log = Self::log(&mut inner, key)?;
        if number == GET_STREAM && log.streams.contains_key(&number) {
            // Its pump has not dropped it yet: reusing it would carry its
            // events, and its ids, across the gap between the two streams.
            return None;
        }
        if !log.streams.contains_key(&number) {
            let mut s = Stream::new();
            if number == GET_STREAM {
                // A GET stream reuses number 0: one position on, and nothing
                // at or before it is of this stream, so an id of an earlier
                // GET stream of the session is past what is kept (a 410,
                // never a replay with a silent gap).
                log.seq += 1;
                s.floor = log.seq;
                s.head = log.seq;
            }
            log.streams.insert(number, s);
        }
        Some((number, log.tag.clone()))
    }

    /// The tag of the session's log, if it has one.
    pub(crate) fn tag(&self, key: &LogKey) -> Option<String> {
        let mut inner = self.lock();
        Self::log(&mut inner, key).map(|l| l.tag.clone())
    }

    /// What `Last-Event-ID` `raw` names for this session and principal.
    pub(crate) fn resolve(&self, key: &LogKey, raw: &str) -> Resume {
        let mut inner = self.lock();
        let Some(log) = Self::log(&mut inner, key) else {
            return Resume::NotOurs;
        };
        let Some(id) = parse_id(&log.tag, raw) else {
            return Resume::NotOurs;
        };
        if id.seq > log.seq || id.stream >= log.next_stream {
            return Resume::NotOurs;
        }
        match log.streams.get(&id.stream) {
            // Events after it were dropped: resuming there would be a gap.
            Some(s) if id.seq < s.floor => Resume::Gone,
            Some(_) => Resume::At(id),
            None => Resume::Gone,
        }
    }

    /// The id of position `seq` of `stream` (the priming event's, and each
    /// event's).
    pub(crate) fn id(tag: &str, stream: u64, seq: u64) -> String {
        format!("{tag}-{stream}-{seq}")
    }

    /// The session's current position (a new reader's cursor: only what is
    /// appended after it).
    pub(crate) fn position(&self, key: &LogKey) -> u64 {
        let mut inner = self.lock();
        Self::log(&mut inner, key).map_or(0, |l| l.seq)
    }

    /// Appends one event to `stream`; returns whether it was kept (`false`
    /// only when the session or the stream is gone). Past the session's
    /// bounds its own oldest events go first, then past the server's budget
    /// the server's oldest events, whichever session holds them. An event
    /// larger than a bound on its own is still kept, alone: it pushes out
    /// everything older, so a reader behind those finds a [`Gap`], but a
    /// reader that has written them gets it.
    pub(crate) fn append(&self, key: &LogKey, stream: u64, data: Bytes, last: bool) -> bool {
        let mut guard = self.lock();
        let inner = &mut *guard;
        let bounds = self.bounds;
        let len = data.len();
        let Some(sid) = inner
            .sessions
            .get_key_value(key.sid)
            .filter(|(_, l)| l.principal.as_deref() == key.principal)
            .map(|(sid, _)| sid.clone())
        else {
            return false;
        };
        let seq = {
            let Some(log) = inner.sessions.get_mut(&sid) else {
                return false;
            };
            if !log.streams.contains_key(&stream) {
                return false;
            }
            log.seq += 1;
            // The session's bounds: its own oldest events go first.
            while log.events >= bounds.per_session_events
                || log.bytes + len > bounds.per_session_bytes
            {
                let Some(freed) = log.drop_oldest() else {
                    break;
                };
                inner.bytes -= freed;
                inner.events -= 1;
            }
            log.seq
        };
        // The server's budget: the oldest events of any session go first.
        while inner.bytes + len > bounds.total_bytes {
            if !inner.drop_oldest() {
                break;
            }
        }
        let Some(log) = inner.sessions.get_mut(&sid) else {
            return false;
        };
        let Some(s) = log.streams.get_mut(&stream) else {
            return false;
        };
        s.head = seq;
        s.ended |= last;
        s.events.push_back(Event { seq, data, last });
        log.order.push_back((stream, seq));
        log.events += 1;
        log.bytes += len;
        inner.order.push_back((sid, stream, seq));
        inner.bytes += len;
        inner.events += 1;
        s.wake.send_replace(seq);
        log.compact();
        inner.compact();
        true
    }

    /// Makes a new reader the one of `stream` (the earlier one, if any, is
    /// superseded). Returns its number and a receiver that changes when
    /// events are appended or the stream is taken over, or `None` when the
    /// stream is gone.
    pub(crate) fn attach(&self, key: &LogKey, stream: u64) -> Option<(u64, watch::Receiver<u64>)> {
        let mut inner = self.lock();
        let log = Self::log(&mut inner, key)?;
        log.next_reader += 1;
        let reader = log.next_reader;
        let s = log.streams.get_mut(&stream)?;
        s.reader = reader;
        s.idle_since = None;
        let rx = s.wake.subscribe();
        s.wake.send_modify(|_| ());
        Some((reader, rx))
    }

    /// Whether `stream` has a reader now.
    pub(crate) fn has_reader(&self, key: &LogKey, stream: u64) -> bool {
        let mut inner = self.lock();
        Self::log(&mut inner, key)
            .and_then(|l| l.streams.get(&stream))
            .is_some_and(|s| s.reader != 0)
    }

    /// Reader `reader` of `stream` lets go (its response ended).
    pub(crate) fn detach(&self, key: &LogKey, stream: u64, reader: u64) {
        let mut inner = self.lock();
        if let Some(s) = Self::log(&mut inner, key).and_then(|l| l.streams.get_mut(&stream))
            && s.reader == reader
        {
            s.reader = 0;
            s.idle_since = Some(Instant::now());
        }
    }

    /// Ends the current reader of `stream` (SSE polling: the server closes
    /// the response, the client reconnects and resumes).
    pub(crate) fn close_reader(&self, key: &LogKey, stream: u64) {
        let mut inner = self.lock();
        if let Some(s) = Self::log(&mut inner, key).and_then(|l| l.streams.get_mut(&stream)) {
            s.reader = 0;
            s.idle_since.get_or_insert_with(Instant::now);
            s.wake.send_modify(|_| ());
        }
    }

    /// What reader `reader` of `stream` writes after `cursor` (at most
    /// `max` events). A [`Gap`] when events after it were dropped.
    pub(crate) fn read(
        &self,
        key: &LogKey,
        stream: u64,
        reader: u64,
        cursor: u64,
        max: usize,
    ) -> Result<Read, Gap> {
        let mut inner = self.lock();
        let Some(s) = Self::log(&mut inner, key).and_then(|l| l.streams.get(&stream)) else {
            return Ok(Read::Ended);
        };
        if s.reader != reader {
            return Ok(Read::Superseded);
        }
        if cursor < s.floor {
            return Err(Gap);
        }
        let start = s.events.partition_point(|e| e.seq <= cursor);
        let events: Vec<Event> = s.events.iter().skip(start).take(max).cloned().collect();
        if events.is_empty() {
            if s.ended {
                return Ok(Read::Finished);
            }
            return Ok(Read::Wait);
        }
        Ok(Read::Events(events))
    }

    /// How long `stream` has had no reader (`None` while it has one, or when
    /// it is gone).
    pub(crate) fn idle_for(&self, key: &LogKey, stream: u64) -> Option<Duration> {
        let mut inner = self.lock();
        Self::log(&mut inner, key)
            .and_then(|l| l.streams.get(&stream))
            .and_then(|s| s.idle_since)
            .map(|t| t.elapsed())
    }

    /// Resolves once `stream` is no longer kept (at once if it is not).
    pub(crate) fn until_dropped(
        &self,
        key: &LogKey,
        stream: u64,
    ) -> impl std::future::Future<Output = ()> + Send + 'static {
        let rx = {
            let mut inner = self.lock();
            Self::log(&mut inner, key)
                .and_then(|l| l.streams.get(&stream))
                .map(|s| s.wake.subscribe())
        };
        async move {
            if let Some(mut rx) = rx {
                // The sender goes with the stream.
                while rx.changed().await.is_ok() {}
            }
        }
    }

    /// Whether `stream` is still kept.
    pub(crate) fn holds(&self, key: &LogKey, stream: u64) -> bool {
        let mut inner = self.lock();
        Self::log(&mut inner, key).is_some_and(|l| l.streams.contains_key(&stream))
    }

    /// Drops `stream` and what it keeps (its reader ends).
    pub(crate) fn remove(&self, key: &LogKey, stream: u64) {
        let mut guard = self.lock();
        let inner = &mut *guard;
        let Some(log) = inner
            .sessions
            .get_mut(key.sid)
            .filter(|l| l.principal.as_deref() == key.principal)
        else {
            return;
        };
        let (events, bytes) = log.remove_stream(stream);
        log.compact();
        inner.events -= events;
        inner.bytes -= bytes;
        inner.compact();
    }

    /// Drops the session's log (DELETE).
    pub(crate) fn remove_session(&self, sid: &str) {
        self.lock().remove_session(sid);
    }

    /// Events and bytes kept for `sid`, and in all.
    #[cfg(test)]
    pub(crate) fn held(&self, sid: &str) -> (usize, usize, usize, usize) {
        let inner = self.lock();
        let (events, bytes) = inner
            .sessions
            .get(sid)
            .map_or((0, 0), |l| (l.events, l.bytes));
        (events, bytes, inner.events, inner.bytes)
    }
}

/// Parses `<tag>-<stream>-<seq>` for a log with `tag`.
fn parse_id(tag: &str, raw: &str) -> Option<EventId> {
    let rest = raw.trim().strip_prefix(tag)?.strip_prefix('-')?;
    let (stream, seq) = rest.split_once('-')?;
    Some(EventId {
        stream: stream.parse().ok()?,
        seq: seq.parse().ok()?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn store(events: usize, bytes: usize, total: usize) -> EventStore {
        EventStore::new(EventBounds {
            per_session_events: events,
            per_session_bytes: bytes,
            total_bytes: total,
            max_sessions: 10,
            resume_window: Duration::from_secs(60),
        })
    }

    fn key(sid: &str) -> LogKey<'_> {
        LogKey {
            sid,
            principal: Some("alice"),
            expires: seal::now_ms() + 60_000,
        }
    }

    #[test]
    fn a_reader_gets_what_follows_its_cursor_in_order() {
        let s = store(100, 1 << 20, 1 << 20);
        let k = key("s1");
        let (n, tag) = s.open(&k, Some(GET_STREAM), "t1".into()).expect("opened");
        assert_eq!(n, GET_STREAM);
        let (reader, _rx) = s.attach(&k, n).expect("attached");
        let base = s.position(&k);
        for i in 0..5 {
            assert!(s.append(&k, n, Bytes::from(format!("{i}")), false));
        }
        let Ok(Read::Events(ev)) = s.read(&k, n, reader, base + 2, 10) else {
            panic!("events")
        };
        assert_eq!(
            ev.iter().map(|e| e.seq - base).collect::<Vec<_>>(),
            vec![3, 4, 5]
        );
        let id = EventStore::id(&tag, n, base + 2);
        assert_eq!(
            s.resolve(&k, &id),
            Resume::At(EventId {
                stream: 0,
                seq: base + 2
            })
        );
    }

    #[test]
    fn another_session_or_principal_resolves_nothing() {
        let s = store(100, 1 << 20, 1 << 20);
        let (a, b) = (key("a"), key("b"));
        let (_, tag_a) = s.open(&a, Some(GET_STREAM), "ta".into()).expect("a");
        s.open(&b, Some(GET_STREAM), "tb".into()).expect("b");
        let primed = s.position(&a);
        s.append(&a, GET_STREAM, Bytes::from_static(b"x"), false);
        let id = EventStore::id(&tag_a, GET_STREAM, primed);
        assert_eq!(s.resolve(&b, &id), Resume::NotOurs);
        let bob = LogKey {
            principal: Some("bob"),
            ..a
        };
        assert_eq!(s.resolve(&bob, &id), Resume::NotOurs);
        assert_eq!(s.resolve(&a, "garbage"), Resume::NotOurs);
        assert_eq!(
            s.resolve(&a, &id),
            Resume::At(EventId {
                stream: 0,
                seq: primed
            })
        );
    }

    #[test]
    fn the_oldest_events_go_first_and_an_old_cursor_is_a_gap() {
        let s = store(3, 1 << 20, 1 << 20);
        let k = key("s");
        s.open(&k, Some(GET_STREAM), "t".into());
        let (reader, _rx) = s.attach(&k, GET_STREAM).expect("attached");
        let base = s.position(&k);
        for i in 0..5 {
            s.append(&k, GET_STREAM, Bytes::from(format!("{i}")), false);
        }
        assert_eq!(s.held("s").0, 3);
        assert_eq!(
            s.read(&k, GET_STREAM, reader, base + 1, 10).unwrap_err(),
            Gap
        );
        let Ok(Read::Events(ev)) = s.read(&k, GET_STREAM, reader, base + 2, 10) else {
            panic!("events")
        };
        assert_eq!(ev.len(), 3);
    }

    #[test]
    fn bytes_are_bounded_per_session_and_in_all_oldest_first() {
        let s = store(1000, 100, 150);
        let (a, b) = (key("a"), key("b"));
        s.open(&a, Some(GET_STREAM), "ta".into());
        s.open(&b, Some(GET_STREAM), "tb".into());
        let (ra, _rx) = s.attach(&a, GET_STREAM).expect("attached");
        for _ in 0..50 {
            s.append(&a, GET_STREAM, Bytes::from(vec![b'x'; 30]), false);
        }
        let (events, bytes, _, _) = s.held("a");
        assert!(
            bytes <= 100 && events == 3,
            "{events} events, {bytes} bytes"
        );
        let a_cursor = s.position(&a) - 3;
        assert!(matches!(
            s.read(&a, GET_STREAM, ra, a_cursor, 10),
            Ok(Read::Events(_))
        ));
        for _ in 0..50 {
            s.append(&b, GET_STREAM, Bytes::from(vec![b'y'; 30]), false);
        }
        let (_, a_bytes, all_events, all_bytes) = s.held("a");
        assert!(all_bytes <= 150, "{all_bytes} bytes in all");
        assert_eq!(all_events, all_bytes / 30);
        assert!(
            a_bytes < bytes,
            "a's events were the oldest: they went first"
        );
        assert_eq!(s.read(&a, GET_STREAM, ra, a_cursor, 10).unwrap_err(), Gap);
        // Larger than the bounds on its own: kept alone, so a reader that
        // has written what came before gets it.
        let head = s.position(&a);
        assert!(s.append(&a, GET_STREAM, Bytes::from(vec![b'z'; 200]), false));
        let Ok(Read::Events(ev)) = s.read(&a, GET_STREAM, ra, head, 10) else {
            panic!("the large event")
        };
        assert_eq!(ev.len(), 1);
        assert_eq!(ev[0].data.len(), 200);
        assert_eq!(s.held("a").0, 1);
        assert_eq!(s.held("b").0, 0);
    }

    #[test]
    fn what_the_store_keeps_track_of_stays_bounded_under_a_flood() {
        let s = store(10, 1 << 20, 4000);
        let keys: Vec<String> = (0..20).map(|i| format!("s{i}")).collect();
        for k in &keys {
            s.open(&key(k), Some(GET_STREAM), k.clone());
        }
        for round in 0..2000 {
            let k = key(&keys[round % keys.len()]);
            s.append(&k, GET_STREAM, Bytes::from(vec![b'x'; 40]), false);
        }
        let inner = s.lock();
        assert!(inner.bytes <= 4000);
        assert!(inner.order.len() <= 2 * inner.events + 1024);
        for log in inner.sessions.values() {
            assert!(log.events <= 10 && log.order.len() <= 2 * log.events + 64);
        }
    }

    /// A new GET stream never reuses the previous one while that is still
    /// kept (its events and ids would carry across the gap between them):
    /// it waits until the previous one is dropped.
    #[test]
    fn a_get_stream_is_opened_again_only_once_the_previous_one_is_dropped() {
        let s = Arc::new(store(10, 1 << 20, 1 << 20));
        let k = key("s");
        let (_, tag) = s.open(&k, Some(GET_STREAM), "t".into()).expect("opened");
        s.append(&k, GET_STREAM, Bytes::from_static(b"old"), false);
        let old = EventStore::id(&tag, GET_STREAM, s.position(&k));
        assert!(
            s.open(&k, Some(GET_STREAM), "t".into()).is_none(),
            "still kept"
        );
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .expect("runtime");
        rt.block_on(async {
            let dropped = s.until_dropped(&k, GET_STREAM);
            let pending = tokio::time::timeout(Duration::from_millis(50), dropped).await;
            assert!(pending.is_err(), "resolved while the stream is kept");
            let dropped = s.until_dropped(&k, GET_STREAM);
            let store = s.clone();
            let remover = tokio::spawn(async move {
                tokio::time::sleep(Duration::from_millis(20)).await;
                store.append(&key("s"), GET_STREAM, Bytes::from_static(b"late"), false);
                store.remove(&key("s"), GET_STREAM);
            });
            tokio::time::timeout(Duration::from_secs(10), dropped)
                .await
                .expect("resolved once dropped");
            remover.await.expect("remover");
        });
        s.open(&k, Some(GET_STREAM), "t".into())
            .expect("opened again");
        assert_eq!(s.resolve(&k, &old), Resume::Gone, "the old stream's ids");
    }

    #[test]
    fn a_session_holds_a_bounded_number_of_streams() {
        let s = store(3, 1 << 20, 1 << 20);
        let k = key("s");
        let mut opened = Vec::new();
        for _ in 0..3 {
            opened.push(s.open(&k, None, "t".into()).expect("room").0);
        }
        // Three running POST streams: no room for a fourth.
        assert!(s.open(&k, None, "t".into()).is_none());
        // One ended, unread: it makes room.
        s.append(&k, opened[1], Bytes::from_static(b"r"), true);
        let (n, _) = s.open(&k, None, "t".into()).expect("room");
        assert!(!s.holds(&k, opened[1]) && s.holds(&k, n));
        assert_eq!(s.held("s").0, 0);
    }

    #[test]
    fn an_id_of_an_earlier_get_stream_is_gone_once_a_new_one_opens() {
        let s = store(10, 1000, 1000);
        let k = key("s");
        let (_, tag) = s.open(&k, Some(GET_STREAM), "t".into()).expect("open");
        s.append(&k, GET_STREAM, Bytes::from_static(b"a"), false);
        let old = EventStore::id(&tag, GET_STREAM, s.position(&k));
        s.remove(&k, GET_STREAM);
        s.open(&k, Some(GET_STREAM), "t".into()).expect("reopen");
        assert_eq!(s.resolve(&k, &old), Resume::Gone);
        let primed = EventStore::id(&tag, GET_STREAM, s.position(&k));
        assert!(matches!(s.resolve(&k, &primed), Resume::At(_)));
    }

    #[test]
    fn at_the_log_cap_a_log_with_no_stream_makes_room() {
        let s = store(10, 1000, 1000);
        let sids: Vec<String> = (0..10).map(|i| format!("s{i}")).collect();
        for sid in &sids {
            s.open(&key(sid), Some(GET_STREAM), "t".into())
                .expect("room");
        }
        assert!(s.open(&key("new"), Some(GET_STREAM), "t".into()).is_none());
        s.remove(&key("s3"), GET_STREAM);
        s.lock().full = None;
        assert!(s.open(&key("new"), Some(GET_STREAM), "t".into()).is_some());
        assert!(s.tag(&key("s3")).is_none(), "the empty log made room");
        assert!(s.tag(&key("s4")).is_some());
    }

    #[test]
    fn a_new_reader_supersedes_the_old_one() {
        let s = store(10, 1000, 1000);
        let k = key("s");
        s.open(&k, Some(GET_STREAM), "t".into());
        let (first, _rx) = s.attach(&k, GET_STREAM).expect("first");
        let (second, _rx2) = s.attach(&k, GET_STREAM).expect("second");
        assert!(matches!(
            s.read(&k, GET_STREAM, first, 0, 10),
            Ok(Read::Superseded)
        ));
        let at = s.position(&k);
        assert!(matches!(
            s.read(&k, GET_STREAM, second, at, 10),
            Ok(Read::Wait)
        ));
        s.remove_session("s");
        assert!(matches!(
            s.read(&k, GET_STREAM, second, 0, 10),
            Ok(Read::Ended)
        ));
        assert_eq!(s.held("s"), (0, 0, 0, 0));
    }
}
