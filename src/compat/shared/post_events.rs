//! A shared session's POST streams in Redis, so a 2025 client whose tool call
//! reply (a POST answered with SSE) was cut resumes it on any node of the
//! fleet with `GET` and `Last-Event-ID`.
//!
//! Keys (in the session's slot, `{sessions}`, beside its hash):
//!
//! | key | what |
//! |---|---|
//! | `sess:{sessions}:<sid>:pev` | stream: every POST stream's events, each entry `s` (the stream's token) then one of `m` (the stream opened: its priming id), `d` (a message), `l` (the response, the stream's last), `c` (the server closed the response for SSE polling) |
//! | `sess:{sessions}:<sid>:pevb` | string: the bytes of the messages kept in `pev` |
//! | `sess:{sessions}:<sid>:pevs` | string: the oldest entry id a cursor may name (the first entry, then the newest one dropped): older is a gap (410) |
//! | `sess:{sessions}:<sid>:pevw` | hash: token → `<writer> <lease ms>` while the request runs, `ended` once its response was written, `gone` once its writer gave up without one (a token missing is a reply whose state is not known: a resumption of it is a gap); and `r:<token>` → the reader writing it to a client now (a newer one takes over, the older ends with a `retry` hint); past 64 fields, those of replies none of whose entries is kept are forgotten |
//! | `sess-all:{sessions}:pev` | sorted set: the sessions with such a history, scored by its expiry (the fleet's bound, `max_session_states`) |
//!
//! One writer per stream (the node running the request) appends its frames
//! in order; any reader, on any node, reads the entries of its stream's
//! token after its cursor. The writer's lease ([`WRITER_LEASE`], renewed
//! while the request runs) tells readers whether more will come: a lapsed
//! lease (its node died, paused, or lost Redis) without a response ends the
//! stream, and a resumption of it is a gap (410), never a wait for nothing.
//!
//! Bounds per session, over all its POST streams: `max_events_per_session`
//! entries and `max_event_bytes_per_session` bytes of messages, the oldest
//! dropped first (a cursor older than the newest dropped entry is a gap);
//! in all, at most `max_session_states` sessions keep such a history. The
//! history expires `HISTORY_TTL` after its last write while a request runs,
//! the resume window after a response, never after the session, and goes
//! with a DELETE (whose mark also refuses any later append).

use super::SharedSessions;
use super::owner::unexpected;
use super::scripts::{eval, post_event_keys, session_keys, stream_prelude};
use crate::protocol::McpError;

/// How long a POST stream's writer counts as alive after its last renewal
/// (it renews every half second while its request runs).
pub(crate) const WRITER_LEASE: std::time::Duration = std::time::Duration::from_secs(5);

/// Shared by the scripts: Redis's clock, a number as an integer string, the
/// writer of a token, and keeping the history until a time.
macro_rules! post_prelude {
    () => {
        r#"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local function fmt(x) return string.format('%.0f', x) end
local function writer_of(token)
  local w = redis.call('HGET', KEYS[5], token)
  if not w then return nil, 0 end
  local name, u = string.match(w, '^(%S+) (%d+)$')
  return name or w, tonumber(u or '0')
end
local function holds(token, writer)
  local name, u = writer_of(token)
  return name == writer and u >= now
end
-- Every key of the history expires at once (the latest of `at` and their
-- expiries): the writers' hash never goes before the entries it speaks for.
local function keep(at)
  for i = 2, 5 do
    local ttl = redis.call('PTTL', KEYS[i])
    if ttl > 0 and now + ttl > at then at = now + ttl end
  end
  for i = 2, 5 do
    if redis.call('EXISTS', KEYS[i]) == 1 then redis.call('PEXPIREAT', KEYS[i], fmt(at)) end
  end
  local s = redis.call('ZSCORE', KEYS[6], ARGV[1])
  if not s or tonumber(s) < at then redis.call('ZADD', KEYS[6], fmt(at), ARGV[1]) end
  local ttl = redis.call('PTTL', KEYS[6])
  if ttl < 0 or now + ttl < at then redis.call('PEXPIREAT', KEYS[6], fmt(at)) end
end
"#
    };
}

/// KEYS: the session's hash, then [`post_event_keys`]. ARGV: the session id,
/// the token, the writer, its lease (ms), the history's TTL (ms), the
/// session's expiry (ms since the epoch), the fleet's bound on sessions.
/// `{'D'}` a deleted session, `{'F'}` the fleet keeps as many histories as
/// it may, else `{'O', the opening entry id}`.
const OPEN: &str = concat!(
    post_prelude!(),
    r#"
if redis.call('HGET', KEYS[1], 'd') then return {'D'} end
redis.call('ZREMRANGEBYSCORE', KEYS[6], '-inf', now)
if not redis.call('ZSCORE', KEYS[6], ARGV[1])
    and redis.call('ZCARD', KEYS[6]) >= tonumber(ARGV[7]) then return {'F'} end
-- Writers that gave up or lapsed, none of whose events are kept any
-- more (a cursor of theirs is a gap anyway), are forgotten.
if redis.call('HLEN', KEYS[5]) > 64 then
  local kept = {}
  for _, e in ipairs(redis.call('XRANGE', KEYS[2], '-', '+')) do kept[e[2][2]] = true end
  for _, f in ipairs(redis.call('HKEYS', KEYS[5])) do
    local tok = string.match(f, '^r:(.*)$')
    if tok then
      if not kept[tok] then redis.call('HDEL', KEYS[5], f) end
    else
      local _, u = writer_of(f)
      if u < now and not kept[f] then redis.call('HDEL', KEYS[5], f) end
    end
  end
end
local id = redis.call('XADD', KEYS[2], '*', 's', ARGV[2], 'm', '')
if redis.call('EXISTS', KEYS[4]) == 0 then redis.call('SET', KEYS[4], id) end
if redis.call('EXISTS', KEYS[3]) == 0 then redis.call('SET', KEYS[3], 0) end
redis.call('HSET', KEYS[5], ARGV[2], ARGV[3] .. ' ' .. fmt(now + tonumber(ARGV[4])))
-- The reply's first reader: its own response, named after its writer.
redis.call('HSET', KEYS[5], 'r:' .. ARGV[2], ARGV[3])
keep(math.min(tonumber(ARGV[6]), now + tonumber(ARGV[5])))
return {'O', id}
"#
);

/// KEYS as [`OPEN`]. ARGV as [`OPEN`]'s first six, then the most entries,
/// the most bytes, the resume window (ms), then pairs of kind and message.
/// `{'D'}` a deleted session, `{'L'}` the writer no longer holds the stream
/// (its lease lapsed: going on would hide a gap), else `{'O'}`.
const APPEND: &str = concat!(
    post_prelude!(),
    r#"
if redis.call('HGET', KEYS[1], 'd') then return {'D'} end
if not holds(ARGV[2], ARGV[3]) then return {'L'} end
local maxlen, maxbytes = tonumber(ARGV[7]), tonumber(ARGV[8])
local n = redis.call('XLEN', KEYS[2])
local bytes = tonumber(redis.call('GET', KEYS[3]) or '0')
local dropped, last = nil, false
for m = 10, #ARGV - 1, 2 do
  local kind, data = ARGV[m], ARGV[m + 1]
  bytes = bytes + #data
  while n >= maxlen or bytes > maxbytes do
    local batch = redis.call('XRANGE', KEYS[2], '-', '+', 'COUNT', 64)
    if #batch == 0 then break end
    for _, e in ipairs(batch) do
      if n < maxlen and bytes <= maxbytes then break end
      redis.call('XDEL', KEYS[2], e[1])
      dropped = e[1]
      n = n - 1
      bytes = bytes - #(e[2][4] or '')
    end
  end
  redis.call('XADD', KEYS[2], '*', 's', ARGV[2], kind, data)
  n = n + 1
  if kind == 'l' then last = true end
end
redis.call('SET', KEYS[3], bytes)
if dropped then redis.call('SET', KEYS[4], dropped) end
if last then
  redis.call('HSET', KEYS[5], ARGV[2], 'ended')
  keep(math.min(tonumber(ARGV[6]), now + tonumber(ARGV[9])))
else
  redis.call('HSET', KEYS[5], ARGV[2], ARGV[3] .. ' ' .. fmt(now + tonumber(ARGV[4])))
  keep(math.min(tonumber(ARGV[6]), now + tonumber(ARGV[5])))
end
return {'O'}
"#
);

/// KEYS and ARGV as [`OPEN`]'s first six. Renews the writer's lease and the
/// history's life: `{'D'}`, `{'L'}` or `{'O'}` as [`APPEND`].
const TICK: &str = concat!(
    post_prelude!(),
    r#"
if redis.call('HGET', KEYS[1], 'd') then return {'D'} end
if not holds(ARGV[2], ARGV[3]) then return {'L'} end
redis.call('HSET', KEYS[5], ARGV[2], ARGV[3] .. ' ' .. fmt(now + tonumber(ARGV[4])))
keep(math.min(tonumber(ARGV[6]), now + tonumber(ARGV[5])))
return {'O'}
"#
);

/// KEYS: the writers' hash. ARGV: the token, the writer. The writer gave up
/// without a response: its stream is marked `gone` (readers end, a
/// resumption is a gap).
const GIVE_UP: &str = r#"
local w = redis.call('HGET', KEYS[1], ARGV[1])
if w and string.match(w, '^(%S+)') == ARGV[2] then
  redis.call('HSET', KEYS[1], ARGV[1], 'gone')
  return 1
end
return 0
"#;

/// KEYS: the session's hash, the stream, its floor, the writers. ARGV: the
/// token, the cursor, the reader (which takes the reply over from an older
/// one when it may resume; `''` to only ask). `{'D'}` a deleted session,
/// `{'N'}` the cursor names no entry of this token, `{'G'}` what followed it
/// is not all kept (or its writer gave up, or its lease lapsed, before the
/// response, or its state is no longer known), else `{'O'}`.
const CHECK: &str = concat!(
    stream_prelude!(),
    r#"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
if redis.call('HGET', KEYS[1], 'd') then return {'D'} end
local cur = ARGV[2]
if not string.match(cur, '^%d+-%d+$') then return {'N'} end
local floor = redis.call('GET', KEYS[3])
if not floor or lt(cur, floor) then return {'G'} end
local head = '0-0'
if redis.call('EXISTS', KEYS[2]) == 1 then head = info(KEYS[2]) end
if lt(head, cur) then return {'N'} end
-- The floor may name an entry dropped since (then no token to check).
local at = redis.call('XRANGE', KEYS[2], cur, cur)
if (cur ~= floor and #at == 0) or (#at > 0 and at[1][2][2] ~= ARGV[1]) then return {'N'} end
-- Finished, or its writer's lease runs; else (gave up, lapsed, or its state
-- is not known) what followed may be missing.
local w = redis.call('HGET', KEYS[4], ARGV[1])
local u = w and string.match(w, '^%S+ (%d+)$')
if w ~= 'ended' and (not u or tonumber(u) < now) then return {'G'} end
if ARGV[3] ~= '' then redis.call('HSET', KEYS[4], 'r:' .. ARGV[1], ARGV[3]) end
return {'O'}
"#
);

/// KEYS: the stream, its floor, the writers. ARGV: the token, the cursor,
/// the most entries to scan, the reader. `{'S'}` a newer reader took the
/// reply over, `{'G'}` what followed the cursor is not all kept, else
/// `{'O', writer state, last entry scanned, id, kind, message, ...}`: the
/// state is `W` (writing), `E` (ended with its response) or `X` (its writer
/// gave up or its lease lapsed, or its state is not known).
const READ: &str = concat!(
    stream_prelude!(),
    r#"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local r = redis.call('HGET', KEYS[3], 'r:' .. ARGV[1])
if r and r ~= ARGV[4] then return {'S'} end
local floor = redis.call('GET', KEYS[2])
if not floor or lt(ARGV[2], floor) then return {'G'} end
local state = 'X'
local w = redis.call('HGET', KEYS[3], ARGV[1])
if w == 'ended' then
  state = 'E'
elseif w then
  local u = string.match(w, '^%S+ (%d+)$')
  if u and tonumber(u) >= now then state = 'W' end
end
local out = {'O', state, ARGV[2]}
for _, e in ipairs(redis.call('XRANGE', KEYS[1], '(' .. ARGV[2], '+', 'COUNT', ARGV[3])) do
  out[3] = e[1]
  local f = e[2]
  if f[2] == ARGV[1] and f[3] ~= 'm' then
    out[#out + 1] = e[1]
    out[#out + 1] = f[3]
    out[#out + 1] = f[4]
  end
end
return out
"#
);

/// What a frame of a POST stream is, in its history.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum PostKind {
    /// A message before the response (a notification, a server-to-client
    /// request).
    Message,
    /// The response: the stream's last event.
    Last,
    /// The server closed the response for SSE polling (the request's
    /// handler asked to): its reader ends with a `retry` hint.
    Close,
}

impl PostKind {
    fn field(self) -> &'static str {
        match self {
            PostKind::Message => "d",
            PostKind::Last => "l",
            PostKind::Close => "c",
        }
    }

    fn of(field: &[u8]) -> Option<Self> {
        match field {
            b"d" => Some(PostKind::Message),
            b"l" => Some(PostKind::Last),
            b"c" => Some(PostKind::Close),
            _ => None,
        }
    }
}

/// What opening a POST stream's history found.
#[derive(Debug)]
pub(crate) enum PostOpened {
    /// Opened: the entry id its priming event names.
    Opened(String),
    /// The session was DELETEd.
    Deleted,
    /// The fleet keeps as many sessions' POST histories as it may.
    Full,
}

/// What an append (or a renewal) found.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum PostWrite {
    /// Written.
    Kept,
    /// The session was DELETEd.
    Deleted,
    /// The writer's lease lapsed: the stream is no longer its to write.
    Lost,
}

/// Whether a POST stream may be resumed from a cursor.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum PostCheck {
    /// Yes: read it after the cursor.
    Resumable,
    /// The session was DELETEd.
    Deleted,
    /// The cursor names no event of that stream.
    NotOurs,
    /// What followed the cursor is not all kept, or will never come.
    Gone,
}

/// Whether more events of a POST stream will come.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Writer {
    /// Its request runs: more will come.
    Writing,
    /// Its response was written.
    Ended,
    /// Its writer gave up or vanished before the response.
    Lost,
}

/// One event of a POST stream.
#[derive(Debug)]
pub(crate) struct PostEvent {
    /// Its entry id.
    pub(crate) id: String,
    /// What it is.
    pub(crate) kind: PostKind,
    /// The JSON-RPC message (empty for a close).
    pub(crate) data: Vec<u8>,
}

/// What one read of a POST stream found.
#[derive(Debug)]
pub(crate) enum PostFetched {
    /// Its events after the cursor (maybe none).
    Events {
        /// Whether more will come.
        writer: Writer,
        /// The last entry scanned (the new cursor), of this stream or not.
        last: String,
        /// Its events, in order.
        events: Vec<PostEvent>,
    },
    /// What followed the cursor is not all kept.
    Gone,
    /// A newer reader took the reply over (the client resumed it
    /// elsewhere): end with a `retry` hint.
    Superseded,
}

/// The stream a POST stream's frames go to, and how long its history lives.
#[derive(Clone, Copy, Debug)]
pub(crate) struct PostBounds {
    /// Entries per session at most.
    pub(crate) max_events: usize,
    /// Bytes of messages per session at most.
    pub(crate) max_bytes: usize,
    /// How long a response stays after it was written.
    pub(crate) resume_window: std::time::Duration,
}

fn ms(d: std::time::Duration) -> String {
    d.as_millis().to_string()
}

fn text(part: &[u8]) -> Result<String, McpError> {
    String::from_utf8(part.to_vec()).map_err(|_| unexpected())
}

impl SharedSessions {
    /// The keys of `sid`'s POST history, its hash first.
    fn post_keys(&self, sid: &str) -> [String; 6] {
        let [hash, _] = session_keys(&self.node, sid);
        let [pev, pevb, pevs, pevw, all] = post_event_keys(&self.node, sid);
        [hash, pev, pevb, pevs, pevw, all]
    }

    /// The first arguments of the writer's scripts.
    fn post_args(sid: &str, token: &str, writer: &str, expires: u64) -> Vec<String> {
        vec![
            sid.to_owned(),
            token.to_owned(),
            writer.to_owned(),
            ms(WRITER_LEASE),
            ms(super::events::HISTORY_TTL),
            expires.to_string(),
        ]
    }

    fn post_write(answer: &[Vec<u8>]) -> Result<PostWrite, McpError> {
        match answer.first().map(Vec::as_slice) {
            Some(b"O") => Ok(PostWrite::Kept),
            Some(b"D") => Ok(PostWrite::Deleted),
            Some(b"L") => Ok(PostWrite::Lost),
            _ => Err(unexpected()),
        }
    }

    /// This node's name for POST stream writer number `n`.
    pub(crate) fn writer_name(&self, n: u64) -> String {
        format!("{}:p{n}", self.node.node())
    }

    /// Opens the history of POST stream `token` of session `sid` for
    /// `writer` (expiring with the session at `expires`).
    pub(crate) async fn open_post(
        &self,
        sid: &str,
        token: &str,
        writer: &str,
        expires: u64,
    ) -> Result<PostOpened, McpError> {
        let keys = self.post_keys(sid);
        let mut args = Self::post_args(sid, token, writer, expires);
        args.push(self.bounds.max_sessions.to_string());
        let answer: Vec<Vec<u8>> = self.run(eval(OPEN, &keys, &args)).await?;
        match answer.as_slice() {
            [o, id] if o == b"O" => Ok(PostOpened::Opened(text(id)?)),
            [d] if d == b"D" => Ok(PostOpened::Deleted),
            [f] if f == b"F" => Ok(PostOpened::Full),
            _ => Err(unexpected()),
        }
    }

    /// Appends frames of POST stream `token`, in order, within `bounds` (the
    /// oldest entries of the session dropped first).
    pub(crate) async fn append_post(
        &self,
        (sid, token, writer): (&str, &str, &str),
        expires: u64,
        frames: &[(PostKind, bytes::Bytes)],
        bounds: PostBounds,
    ) -> Result<PostWrite, McpError> {
        let keys = self.post_keys(sid);
        let mut cmd = eval(APPEND, &keys, &Self::post_args(sid, token, writer, expires));
        cmd.arg(bounds.max_events.max(1))
            .arg(bounds.max_bytes.max(1))
            .arg(ms(bounds.resume_window));
        for (kind, data) in frames {
            cmd.arg(kind.field()).arg(data.as_ref());
        }
        let answer: Vec<Vec<u8>> = self.run(cmd).await?;
        Self::post_write(&answer)
    }

    /// Renews the writer's lease on POST stream `token` while its request
    /// runs.
    pub(crate) async fn tick_post(
        &self,
        (sid, token, writer): (&str, &str, &str),
        expires: u64,
    ) -> Result<PostWrite, McpError> {
        let keys = self.post_keys(sid);
        let args = Self::post_args(sid, token, writer, expires);
        let answer: Vec<Vec<u8>> = self.run(eval(TICK, &keys, &args)).await?;
        Self::post_write(&answer)
    }

    /// The writer of POST stream `token` stops without its response: its
    /// readers end and a resumption of it is a gap (else its lease lapses
    /// within [`WRITER_LEASE`], with the same outcome).
    pub(crate) async fn give_up_post(&self, sid: &str, token: &str, writer: &str) {
        let [_, _, _, pevw, _] = post_event_keys(&self.node, sid);
        let mut cmd = eval(GIVE_UP, &[pevw], &[]);
        cmd.arg(token).arg(writer);
        if let Err(error) = self.run::<i64>(cmd).await {
            tracing::debug!(%error, "a POST stream's writer left to lapse");
        }
    }

    /// Whether POST stream `token` of `sid` may be resumed after `cursor`;
    /// if so, `reader` (unless empty) is now the one writing it to a client.
    pub(crate) async fn check_post(
        &self,
        sid: &str,
        token: &str,
        (cursor, reader): (&str, &str),
    ) -> Result<PostCheck, McpError> {
        let [hash, _] = session_keys(&self.node, sid);
        let [pev, _, pevs, pevw, _] = post_event_keys(&self.node, sid);
        let args = [token.to_owned(), cursor.to_owned(), reader.to_owned()];
        let answer: Vec<Vec<u8>> = self
            .run(eval(CHECK, &[hash, pev, pevs, pevw], &args))
            .await?;
        match answer.first().map(Vec::as_slice) {
            Some(b"O") => Ok(PostCheck::Resumable),
            Some(b"D") => Ok(PostCheck::Deleted),
            Some(b"N") => Ok(PostCheck::NotOurs),
            Some(b"G") => Ok(PostCheck::Gone),
            _ => Err(unexpected()),
        }
    }

    /// Reads POST stream `token`'s events after `cursor` for `reader`,
    /// scanning at most `count` entries of the session's history.
    pub(crate) async fn read_post(
        &self,
        (sid, token): (&str, &str),
        (cursor, reader): (&str, &str),
        count: usize,
    ) -> Result<PostFetched, McpError> {
        let [pev, _, pevs, pevw, _] = post_event_keys(&self.node, sid);
        let args = [
            token.to_owned(),
            cursor.to_owned(),
            count.max(1).to_string(),
            reader.to_owned(),
        ];
        let answer: Vec<Vec<u8>> = self.run(eval(READ, &[pev, pevs, pevw], &args)).await?;
        let Some((code, rest)) = answer.split_first() else {
            return Err(unexpected());
        };
        match code.as_slice() {
            b"G" => Ok(PostFetched::Gone),
            b"S" => Ok(PostFetched::Superseded),
            b"O" => {
                let [state, last, entries @ ..] = rest else {
                    return Err(unexpected());
                };
                let writer = match state.as_slice() {
                    b"W" => Writer::Writing,
                    b"E" => Writer::Ended,
                    b"X" => Writer::Lost,
                    _ => return Err(unexpected()),
                };
                let mut events = Vec::with_capacity(entries.len() / 3);
                for triple in entries.chunks(3) {
                    let [id, kind, data] = triple else {
                        return Err(unexpected());
                    };
                    let kind = PostKind::of(kind).ok_or_else(unexpected)?;
                    events.push(PostEvent {
                        id: text(id)?,
                        kind,
                        data: data.clone(),
                    });
                }
                Ok(PostFetched::Events {
                    writer,
                    last: text(last)?,
                    events,
                })
            }
            _ => Err(unexpected()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::sessions_with;
    use super::*;
    use crate::pubsub::redis_child::{RedisChild, block_on};
    use crate::suite::sealing::seal;

    /// An entry of `XRANGE`: its id and its fields.
    type Entry = (String, Vec<(String, Vec<u8>)>);

    /// Every message a token's reader gets after `cursor`, read to the end.
    async fn read_all(s: &SharedSessions, token: &str, mut cursor: String) -> Option<Vec<Vec<u8>>> {
        let mut out = Vec::new();
        loop {
            match s
                .read_post(("s1", token), (&cursor, "w"), 7)
                .await
                .expect("read")
            {
                PostFetched::Gone | PostFetched::Superseded => return None,
                PostFetched::Events { last, events, .. } => {
                    if last == cursor {
                        return Some(out);
                    }
                    out.extend(events.into_iter().map(|e| e.data));
                    cursor = last;
                }
            }
        }
    }

    /// Two POST streams of one session flooded in turns keep the session's
    /// newest entries within both bounds, the byte count exact; a cursor
    /// from before what is kept is a gap, one within it reads exactly what
    /// followed (its own stream's events only).
    #[test]
    fn a_flooded_sessions_post_history_stays_within_its_bounds() {
        let redis = RedisChild::start();
        block_on(async {
            let s = sessions_with(&redis, 10).await;
            let expires = seal::now_ms() + 60_000;
            let bounds = PostBounds {
                max_events: 40,
                max_bytes: 1500,
                resume_window: std::time::Duration::from_secs(60),
            };
            let mut starts = Vec::new();
            for token in ["a", "b"] {
                let opened = s.open_post("s1", token, "w", expires).await.expect("open");
                let PostOpened::Opened(start) = opened else {
                    panic!("{opened:?}");
                };
                starts.push(start);
            }
            let mut sent: Vec<(&str, Vec<u8>)> = Vec::new();
            for round in 0..50u8 {
                let token = if round % 2 == 0 { "a" } else { "b" };
                let batch: Vec<(PostKind, bytes::Bytes)> = (0..3u8)
                    .map(|i| {
                        let n = usize::from(round.wrapping_mul(3).wrapping_add(i)) % 61 + 1;
                        (
                            PostKind::Message,
                            bytes::Bytes::from(vec![b'a' + (round % 26); n]),
                        )
                    })
                    .collect();
                sent.extend(batch.iter().map(|(_, b)| (token, b.to_vec())));
                let wrote = s
                    .append_post(("s1", token, "w"), expires, &batch, bounds)
                    .await
                    .expect("appended");
                assert_eq!(wrote, PostWrite::Kept);
            }
            let [pev, pevb, ..] = post_event_keys(&s.node, "s1");
            let mut range = ::redis::cmd("XRANGE");
            range.arg(&pev).arg("-").arg("+");
            let entries: Vec<Entry> = s.run(range).await.expect("XRANGE");
            let counted: usize = s.run(::redis::Cmd::get(&pevb)).await.expect("GET");
            let kept: Vec<Vec<u8>> = entries.iter().map(|(_, f)| f[1].1.clone()).collect();
            let bytes: usize = kept.iter().map(Vec::len).sum();
            assert_eq!(bytes, counted, "the byte count drifted");
            assert!(
                entries.len() <= 40 && bytes <= 1500,
                "{} {bytes}",
                entries.len()
            );
            let newest: Vec<Vec<u8>> = sent[sent.len() - kept.len()..]
                .iter()
                .map(|(_, b)| b.clone())
                .collect();
            assert_eq!(kept, newest, "not the newest events");
            // From a stream's start (dropped since): a gap.
            assert!(read_all(&s, "a", starts[0].clone()).await.is_none());
            // From within what is kept: exactly what followed, of its stream.
            let cursor = entries[entries.len() - 5].0.clone();
            let token = std::str::from_utf8(&entries[entries.len() - 5].1[0].1)
                .expect("a token")
                .to_owned();
            let got = read_all(&s, &token, cursor).await.expect("kept");
            let want: Vec<Vec<u8>> = sent[sent.len() - 4..]
                .iter()
                .filter(|(t, _)| *t == token)
                .map(|(_, b)| b.clone())
                .collect();
            assert_eq!(got, want);
        });
    }

    /// A finished reply is known as finished for as long as its entries
    /// are kept (the writers' hash expires with them); a reply whose state
    /// is no longer known is a gap, never a finished reply; the floor's id
    /// with another reply's token names nothing.
    #[test]
    fn a_replys_state_lives_as_long_as_its_entries_and_an_unknown_one_is_a_gap() {
        let redis = RedisChild::start();
        block_on(async {
            let s = sessions_with(&redis, 10).await;
            let expires = seal::now_ms() + 600_000;
            let bounds = PostBounds {
                max_events: 100,
                max_bytes: 100_000,
                resume_window: std::time::Duration::from_secs(300),
            };
            let PostOpened::Opened(a0) = s.open_post("s1", "a", "wa", expires).await.expect("open")
            else {
                panic!("not opened");
            };
            let last = [(PostKind::Last, bytes::Bytes::from_static(b"{\"id\":1}"))];
            let wrote = s
                .append_post(("s1", "a", "wa"), expires, &last, bounds)
                .await;
            assert_eq!(wrote.expect("appended"), PostWrite::Kept);
            // Another reply opens with the shorter history life.
            let PostOpened::Opened(b0) = s.open_post("s1", "b", "wb", expires).await.expect("open")
            else {
                panic!("not opened");
            };
            let [pev, _, _, pevw, _] = post_event_keys(&s.node, "s1");
            let pttl = |key: String| {
                let mut cmd = ::redis::cmd("PTTL");
                cmd.arg(key);
                cmd
            };
            let entries_ttl: i64 = s.run(pttl(pev.clone())).await.expect("PTTL");
            let writers_ttl: i64 = s.run(pttl(pevw.clone())).await.expect("PTTL");
            assert!(
                writers_ttl + 1_000 >= entries_ttl,
                "the writers' hash ({writers_ttl} ms) would expire before the entries ({entries_ttl} ms)"
            );
            assert_eq!(
                s.check_post("s1", "a", (&a0, "ra")).await.expect("check"),
                PostCheck::Resumable
            );
            match s
                .read_post(("s1", "a"), (&a0, "ra"), 10)
                .await
                .expect("read")
            {
                PostFetched::Events { writer, events, .. } => {
                    assert_eq!(writer, Writer::Ended);
                    assert_eq!(events.len(), 1);
                }
                other => panic!("{other:?}"),
            }
            // The floor's id (reply a's opening) with reply b's token: not b's.
            assert_eq!(
                s.check_post("s1", "b", (&a0, "rb")).await.expect("check"),
                PostCheck::NotOurs
            );
            // Reply b's state lost (the hash gone): a gap, not a finished reply.
            let _: i64 = s.run(::redis::Cmd::del(&pevw)).await.expect("DEL");
            assert_eq!(
                s.check_post("s1", "b", (&b0, "rb")).await.expect("check"),
                PostCheck::Gone
            );
            match s
                .read_post(("s1", "b"), (&b0, "rb"), 10)
                .await
                .expect("read")
            {
                PostFetched::Events { writer, .. } => assert_eq!(writer, Writer::Lost),
                other => panic!("{other:?}"),
            }
        });
    }

    /// The fleet keeps at most `max_session_states` sessions' POST
    /// histories.
    #[test]
    fn the_fleet_bounds_how_many_sessions_keep_a_post_history() {
        let redis = RedisChild::start();
        block_on(async {
            let s = sessions_with(&redis, 1).await;
            let expires = seal::now_ms() + 60_000;
            let first = s.open_post("s1", "a", "w", expires).await.expect("open");
            assert!(matches!(first, PostOpened::Opened(_)), "{first:?}");
            let again = s.open_post("s1", "b", "w", expires).await.expect("open");
            assert!(
                matches!(again, PostOpened::Opened(_)),
                "the same session: {again:?}"
            );
            let full = s.open_post("s2", "c", "w", expires).await.expect("open");
            assert!(matches!(full, PostOpened::Full), "{full:?}");
        });
    }

    /// At the default bounds (1,000 entries, 1 MiB of messages per
    /// session), a session whose POST reply floods 3,000 progress
    /// notifications keeps the newest 1,000; its Redis memory is printed
    /// (`cargo test -p genmcp --lib post_history_default -- --nocapture`,
    /// the figure in docs/compat-2025.md).
    #[test]
    fn post_history_default_bounds_under_a_flood() {
        let redis = RedisChild::start();
        block_on(async {
            let s = sessions_with(&redis, 10).await;
            let expires = seal::now_ms() + 60_000;
            let bounds = PostBounds {
                max_events: 1000,
                max_bytes: 1 << 20,
                resume_window: std::time::Duration::from_secs(120),
            };
            let opened = s.open_post("s1", "a", "w", expires).await.expect("open");
            assert!(matches!(opened, PostOpened::Opened(_)), "{opened:?}");
            let message = br#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"p","progress":1234,"total":3000}}"#;
            for _ in 0..(3000 / 50) {
                let batch = vec![(PostKind::Message, bytes::Bytes::from_static(message)); 50];
                let wrote = s
                    .append_post(("s1", "a", "w"), expires, &batch, bounds)
                    .await
                    .expect("appended");
                assert_eq!(wrote, PostWrite::Kept);
            }
            let [pev, ..] = post_event_keys(&s.node, "s1");
            let mut xlen = ::redis::cmd("XLEN");
            xlen.arg(&pev);
            let len: usize = s.run(xlen).await.expect("XLEN");
            assert_eq!(len, 1000);
            let mut usage = ::redis::cmd("MEMORY");
            usage.arg("USAGE").arg(&pev).arg("SAMPLES").arg(0);
            let memory: usize = s.run(usage).await.expect("MEMORY USAGE");
            println!(
                "POST history: {len} entries of {} bytes kept, {} bytes of messages, {memory} bytes of Redis memory",
                message.len(),
                len * message.len()
            );
        });
    }

    /// Writers that gave up leave no field behind once their events went:
    /// the writers' hash stays small however many replies were abandoned.
    #[test]
    fn abandoned_writers_are_forgotten_once_their_events_went() {
        let redis = RedisChild::start();
        block_on(async {
            let s = sessions_with(&redis, 10).await;
            let expires = seal::now_ms() + 60_000;
            let bounds = PostBounds {
                max_events: 8,
                max_bytes: 1 << 20,
                resume_window: std::time::Duration::from_secs(60),
            };
            let mut last_open = String::new();
            for i in 0..100 {
                let token = format!("t{i}");
                let opened = s.open_post("s1", &token, "w", expires).await.expect("open");
                let PostOpened::Opened(id) = opened else {
                    panic!("{opened:?}");
                };
                last_open = id;
                let batch = vec![(PostKind::Message, bytes::Bytes::from_static(b"{}"))];
                let wrote = s
                    .append_post(("s1", &token, "w"), expires, &batch, bounds)
                    .await
                    .expect("appended");
                assert_eq!(wrote, PostWrite::Kept);
                s.give_up_post("s1", &token, "w").await;
            }
            let [_, _, _, pevw, _] = post_event_keys(&s.node, "s1");
            let mut hlen = ::redis::cmd("HLEN");
            hlen.arg(&pevw);
            let fields: usize = s.run(hlen).await.expect("HLEN");
            assert!(fields <= 66, "{fields} fields kept");
            // The newest abandoned reply is still known as gone: 410.
            let check = s
                .check_post("s1", "t99", (&last_open, "r"))
                .await
                .expect("check");
            assert_eq!(check, PostCheck::Gone);
        });
    }
}
