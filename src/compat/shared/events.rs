//! A shared session's GET stream events in Redis Streams, so a client that
//! reconnects with `Last-Event-ID` to any node of the fleet resumes there.
//!
//! Keys (in the session's slot, `{sessions}`, beside its hash
//! `sess:{sessions}:<sid>`, so one script sees both):
//!
//! | key | what |
//! |---|---|
//! | `sess:{sessions}:<sid>:ev` | stream: the GET stream's events (field `d`: the JSON-RPC message; an entry `m` marks where a stream started) |
//! | `sess:{sessions}:<sid>:evb` | string: the bytes of the messages kept in `ev` |
//! | `sess:{sessions}:<sid>:evs` | string: the entry id the current stream started at, or the newest one dropped since (older ids are another stream's or dropped: 410) |
//! | `sess:{sessions}:<sid>:evr` | string: the reader writing the stream to a client now (`<node>:r<n>`), `PX` [`READER_TTL`], renewed at every read |
//!
//! Bounds: the holder keeps at most `max_events_per_session` entries and
//! `max_event_bytes_per_session` bytes of messages (one event bigger than
//! that is kept alone), dropping the oldest first (`XDEL`; the newest
//! dropped id becomes the stream's start in `evs`: a cursor older than it is
//! a gap, 410, on Redis 6.2 as on 7). The history
//! expires [`HISTORY_TTL`] after its holder last touched it (never after the
//! session), [`DRAIN_TTL`] after its stream ended, and goes with a DELETE.
//!
//! The node holding the session's GET stream appends every event it writes;
//! every response of the stream, on any node, reads the Redis stream after
//! its cursor: one writer, one reader at a time, in entry order, so each
//! event goes out once and in order. A newer reader takes the stream over
//! (the older one ends with a `retry` hint); an id older than what the
//! stream keeps is a gap, never skipped over; an id past the stream's head
//! names nothing of this session.
//!
//! A stream with no reader is history, not a live stream: it keeps
//! recording (for the resume window) but its session is counted against no
//! bound for it, and a GET without `Last-Event-ID` takes it over; a reader
//! claiming it counts the session again (and may be refused by the bounds).

use super::super::StateKey;
use super::SharedSessions;
use super::owner::unexpected;
use super::scripts::{eval, event_keys, prelude, session_keys, stream_prelude};
use crate::protocol::McpError;
use crate::suite::sealing::seal;

/// How long a reader that stopped reading still counts as the stream's.
pub(crate) const READER_TTL: std::time::Duration = std::time::Duration::from_secs(3);
/// How long a stream's history outlives its holder's last touch (the holder
/// refreshes it every half second while its stream runs).
pub(crate) const HISTORY_TTL: std::time::Duration = std::time::Duration::from_secs(30);
/// How long an ended stream's history stays for its readers to finish.
pub(crate) const DRAIN_TTL: std::time::Duration = std::time::Duration::from_secs(10);

/// KEYS: the session's hash, the stream, its bytes, its start. ARGV: the
/// holder, the most entries, the most bytes, the history's expiry (ms since
/// the epoch), then the messages. `{'L'}` when the holder no longer holds
/// the stream (or its history expired: going on would hide a gap), else
/// `{'O'}`.
const APPEND: &str = r#"
if redis.call('HGET', KEYS[1], 'h') ~= ARGV[1] then return {'L'} end
if redis.call('EXISTS', KEYS[4]) == 0 then return {'L'} end
local maxlen, maxbytes = tonumber(ARGV[2]), tonumber(ARGV[3])
local n = redis.call('XLEN', KEYS[2])
local bytes = tonumber(redis.call('GET', KEYS[3]) or '0')
local dropped = nil
for m = 5, #ARGV do
  bytes = bytes + #ARGV[m]
  while n >= maxlen or bytes > maxbytes do
    local batch = redis.call('XRANGE', KEYS[2], '-', '+', 'COUNT', 64)
    if #batch == 0 then break end
    for _, e in ipairs(batch) do
      if n < maxlen and bytes <= maxbytes then break end
      redis.call('XDEL', KEYS[2], e[1])
      dropped = e[1]
      n = n - 1
      if e[2][1] == 'd' then bytes = bytes - #e[2][2] end
    end
  end
  redis.call('XADD', KEYS[2], 'MAXLEN', maxlen, '*', 'd', ARGV[m])
  n = n + 1
end
redis.call('SET', KEYS[3], bytes)
-- The floor: an id older than the newest dropped entry is a gap (without
-- XINFO's max-deleted-entry-id, which Redis 6.2 lacks).
if dropped then redis.call('SET', KEYS[4], dropped) end
for i = 2, 4 do redis.call('PEXPIREAT', KEYS[i], ARGV[4]) end
return {'O'}
"#;

/// Counted KEYS, then the stream, its bytes, its start, the reader key.
/// ARGV after the bounds: the cursor (`''`: the head), the reader, its TTL
/// (ms), `1` to take the stream only when it has no reader, `1` when the
/// stream opens now (a new history starts), the history's TTL (ms).
/// `{'D'}` a deleted session, `{'N'}` an id past the head, `{'G'}` an id
/// whose following events are not all kept, `{'B'}` a reader holds it, a
/// refusal of `admit`, else `{'O', head, holder, offered}` (`offered`:
/// `'1'` while a draining holder offers the stream, `handoff`).
const CLAIM: &str = concat!(
    prelude!(),
    stream_prelude!(),
    r#"
if redis.call('HGET', KEYS[1], 'd') then return {'D'} end
local ev, evb, evs, evr = KEYS[7], KEYS[8], KEYS[9], KEYS[10]
local until_ = math.min(exp, now + tonumber(ARGV[13]))
if ARGV[12] == '1' then
  if redis.call('EXISTS', ev) == 1 then redis.call('XTRIM', ev, 'MAXLEN', 0) end
  redis.call('SET', evs, redis.call('XADD', ev, '*', 'm', ''))
  redis.call('SET', evb, 0)
  -- Expiring from the start: a refusal below leaves no key without one.
  for _, k in ipairs({ev, evb, evs}) do redis.call('PEXPIREAT', k, fmt(until_)) end
end
local head, maxdel = '0-0', '0-0'
if redis.call('EXISTS', ev) == 1 then head, maxdel = info(ev) end
local start = redis.call('GET', evs)
local after = ARGV[8]
if after ~= '' then
  if not string.match(after, '^%d+-%d+$') then return {'N'} end
  -- Before the head check: a history that expired (no start, head 0-0)
  -- is a gap, not an id of another session.
  if not start or lt(after, start) or lt(after, maxdel) then return {'G'} end
  if lt(head, after) then return {'N'} end
end
if ARGV[11] == '1' and redis.call('EXISTS', evr) == 1 then return {'B'} end
local r = admit(nil)
if r then return {r[1], fmt(r[2])} end
redis.call('SET', evr, ARGV[9], 'PX', ARGV[10])
for _, k in ipairs({ev, evb, evs}) do
  if redis.call('EXISTS', k) == 1 then redis.call('PEXPIREAT', k, fmt(until_)) end
end
local h = redis.call('HGET', KEYS[1], 'h') or ''
local offered = '0'
if h ~= '' and redis.call('HGET', KEYS[1], 'ho') == h then offered = '1' end
return {'O', head, h, offered}
"#
);

/// KEYS: the stream, the reader key, the session's hash, the stream's start.
/// ARGV: the cursor, the reader, its TTL (ms), the most entries to return.
/// `{'X'}` the reader's hold lapsed (claim again), `{'S'}` another reader
/// took over, `{'G'}` events after the cursor are not all kept, else
/// `{'O', holder, offered ('1' while a draining holder offers the stream),
/// last entry read, id, data, id, data, ...}`.
const READ: &str = concat!(
    stream_prelude!(),
    r#"
local cur = redis.call('GET', KEYS[2])
if not cur then return {'X'} end
if cur ~= ARGV[2] then return {'S'} end
redis.call('PEXPIRE', KEYS[2], ARGV[3])
local start = redis.call('GET', KEYS[4])
if not start or lt(ARGV[1], start) then return {'G'} end
if redis.call('EXISTS', KEYS[1]) == 1 then
  local head, maxdel = info(KEYS[1])
  if lt(ARGV[1], maxdel) then return {'G'} end
end
local h = redis.call('HGET', KEYS[3], 'h') or ''
local offered = '0'
if h ~= '' and redis.call('HGET', KEYS[3], 'ho') == h then offered = '1' end
local out = {'O', h, offered, ARGV[1]}
for _, e in ipairs(redis.call('XRANGE', KEYS[1], '(' .. ARGV[1], '+', 'COUNT', ARGV[4])) do
  out[4] = e[1]
  if e[2][1] == 'd' then
    out[#out + 1] = e[1]
    out[#out + 1] = e[2][2]
  end
end
return out
"#
);

/// KEYS: the reader key, the stream, its bytes, its start. ARGV: the
/// history's expiry (ms since the epoch). Whether a reader holds it.
const TICK: &str = r#"
for i = 2, 4 do
  if redis.call('EXISTS', KEYS[i]) == 1 then redis.call('PEXPIREAT', KEYS[i], ARGV[1]) end
end
return redis.call('EXISTS', KEYS[1])
"#;

/// Counted KEYS, then the reader key. Uncounts the session when its
/// stream has no reader and it holds nothing else (no level, no URIs, not
/// deleted). `{'1'}` while a reader holds it, else `{'0'}`.
const UNCOUNT_IDLE: &str = concat!(
    prelude!(),
    r#"
if redis.call('EXISTS', KEYS[7]) == 1 then return {'1'} end
if not redis.call('HGET', KEYS[1], 'l') and not redis.call('HGET', KEYS[1], 'd')
    and redis.call('EXISTS', KEYS[2]) == 0 then
  redis.call('ZREM', KEYS[3], sid)
  redis.call('ZREM', KEYS[5], sid)
end
return {'0'}
"#
);

/// KEYS: the session's hash, the stream, its bytes, its start. ARGV: the
/// holder, the drain TTL (ms). The history of the holder's ended stream
/// expires soon (another holder's is left alone).
const END: &str = r#"
if redis.call('HGET', KEYS[1], 'h') ~= ARGV[1] then return 0 end
for i = 2, 4 do
  if redis.call('EXISTS', KEYS[i]) == 1 then redis.call('PEXPIRE', KEYS[i], ARGV[2]) end
end
return 1
"#;

/// KEYS: the reader key. ARGV: the reader. Lets go of it if still its.
const LEAVE: &str = r#"
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
"#;

/// What a claim of the stream's reading found.
#[derive(Debug)]
pub(crate) enum Claim {
    /// Claimed: the stream's head and its GET stream's holder (`""`: none).
    Claimed {
        /// The last entry id appended (`0-0` for none).
        head: String,
        /// The session's GET stream holder (`<node>:<n>`).
        holder: String,
        /// Its holder drains and offers the stream to another node.
        offered: bool,
    },
    /// The session was DELETEd.
    Deleted,
    /// The id is past the stream's head: not an event of this session.
    NotOurs,
    /// Events after the id are not all kept (dropped by the bounds, or of a
    /// stream that ended).
    Gone,
    /// Another reader holds the stream.
    Busy,
}

/// What one read of the stream found.
#[derive(Debug)]
pub(crate) enum Fetched {
    /// Entries after the cursor (maybe none) and the holder now.
    Events {
        /// The GET stream's holder now (`""` once it let go).
        holder: String,
        /// Its holder drains and offers the stream to another node.
        offered: bool,
        /// The last entry read (the new cursor), events or not.
        last: String,
        /// Entry id and message, in order.
        events: Vec<(String, Vec<u8>)>,
    },
    /// The reader's hold lapsed (its node paused past [`READER_TTL`]): it
    /// claims the stream again.
    Lapsed,
    /// Another reader took the stream over.
    Superseded,
    /// Events after the cursor are not all kept.
    Gone,
}

fn text(part: &[u8]) -> Result<String, McpError> {
    String::from_utf8(part.to_vec()).map_err(|_| unexpected())
}

fn ms(d: std::time::Duration) -> String {
    d.as_millis().to_string()
}

impl SharedSessions {
    /// The history's expiry from now: [`HISTORY_TTL`], never past the
    /// session's `expires`.
    fn history_until(expires: u64) -> u64 {
        let ttl = u64::try_from(HISTORY_TTL.as_millis()).unwrap_or(u64::MAX);
        expires.min(seal::now_ms().saturating_add(ttl))
    }

    /// Appends events of the session's GET stream for `holder`, in order,
    /// within `max_len` entries and `max_bytes` bytes (the oldest dropped
    /// first); `Ok(false)` when `holder` no longer holds the stream (or its
    /// history expired): the stream must end.
    pub(crate) async fn append_events(
        &self,
        sid: &str,
        holder: &str,
        expires: u64,
        messages: &[bytes::Bytes],
        (max_len, max_bytes): (usize, usize),
    ) -> Result<bool, McpError> {
        let [hash, _] = session_keys(&self.node, sid);
        let [ev, evb, evs, _] = event_keys(&self.node, sid);
        let mut cmd = eval(APPEND, &[hash, ev, evb, evs], &[]);
        cmd.arg(holder)
            .arg(max_len.max(1))
            .arg(max_bytes.max(1))
            .arg(Self::history_until(expires));
        for m in messages {
            cmd.arg(m.as_ref());
        }
        let answer: Vec<Vec<u8>> = self.run(cmd).await?;
        match answer.first().map(Vec::as_slice) {
            Some(b"O") => Ok(true),
            Some(b"L") => Ok(false),
            _ => Err(unexpected()),
        }
    }

    /// Keeps the session's history from expiring while its stream runs;
    /// whether a reader holds the stream.
    pub(crate) async fn tick_events(&self, sid: &str, expires: u64) -> Result<bool, McpError> {
        let [ev, evb, evs, evr] = event_keys(&self.node, sid);
        let mut cmd = eval(TICK, &[evr, ev, evb, evs], &[]);
        cmd.arg(Self::history_until(expires));
        let n: i64 = self.run(cmd).await?;
        Ok(n == 1)
    }

    /// Counts the session against no bound for its stream while nobody
    /// reads it (unless it holds a level, URIs or a DELETE mark); whether a
    /// reader holds it after all.
    pub(crate) async fn uncount_idle(&self, session: &StateKey<'_>) -> Result<bool, McpError> {
        let [_, _, _, evr] = event_keys(&self.node, session.sid);
        let answer = self
            .run_counted_with(UNCOUNT_IDLE, session, &[evr], &[])
            .await?;
        Ok(answer.first().is_some_and(|a| a == "1"))
    }

    /// The stream of `holder` ended: its history goes after [`DRAIN_TTL`].
    pub(crate) async fn end_events(&self, sid: &str, holder: &str) {
        let [hash, _] = session_keys(&self.node, sid);
        let [ev, evb, evs, _] = event_keys(&self.node, sid);
        let mut cmd = eval(END, &[hash, ev, evb, evs], &[]);
        cmd.arg(holder).arg(ms(DRAIN_TTL));
        if let Err(error) = self.run::<i64>(cmd).await {
            tracing::debug!(%error, "an ended GET stream's history left to expire");
        }
    }

    /// `reader` stopped writing the stream to a client: it lets go at once
    /// (else its hold lapses after [`READER_TTL`]).
    pub(crate) async fn leave_events(&self, sid: &str, reader: &str) {
        let [_, _, _, evr] = event_keys(&self.node, sid);
        let mut cmd = eval(LEAVE, &[evr], &[]);
        cmd.arg(reader);
        if let Err(error) = self.run::<i64>(cmd).await {
            tracing::debug!(%error, "a GET stream's reader left to lapse");
        }
    }

    /// Makes `reader` the one of the session's event stream (counting the
    /// session again), after checking `after` (an entry id, or `None` for
    /// the head); with `only_if_free`, only when no reader holds it; with
    /// `open`, the stream opens now and a new history starts.
    pub(crate) async fn claim_events(
        &self,
        session: &StateKey<'_>,
        after: Option<&str>,
        reader: &str,
        (only_if_free, open): (bool, bool),
    ) -> Result<Claim, McpError> {
        let flag = |b: bool| if b { "1" } else { "0" }.to_owned();
        let args = [
            after.unwrap_or("").to_owned(),
            reader.to_owned(),
            ms(READER_TTL),
            flag(only_if_free),
            flag(open),
            ms(HISTORY_TTL),
        ];
        let keys = event_keys(&self.node, session.sid);
        let parts = self.run_counted_with(CLAIM, session, &keys, &args).await?;
        Ok(match parts.as_slice() {
            [d] if d == "D" => Claim::Deleted,
            [n] if n == "N" => Claim::NotOurs,
            [g] if g == "G" => Claim::Gone,
            [b] if b == "B" => Claim::Busy,
            [o, head, holder, offered] if o == "O" => Claim::Claimed {
                head: head.clone(),
                holder: holder.clone(),
                offered: offered == "1",
            },
            _ => return Err(unexpected()),
        })
    }

    /// Reads at most `count` entries after `after` for `reader` (renewing
    /// its hold on the stream).
    pub(crate) async fn read_events(
        &self,
        sid: &str,
        after: &str,
        reader: &str,
        count: usize,
    ) -> Result<Fetched, McpError> {
        let [hash, _] = session_keys(&self.node, sid);
        let [ev, _, evs, evr] = event_keys(&self.node, sid);
        let args = [
            after.to_owned(),
            reader.to_owned(),
            ms(READER_TTL),
            count.max(1).to_string(),
        ];
        let answer: Vec<Vec<u8>> = self.run(eval(READ, &[ev, evr, hash, evs], &args)).await?;
        let Some((code, rest)) = answer.split_first() else {
            return Err(unexpected());
        };
        match code.as_slice() {
            b"X" => Ok(Fetched::Lapsed),
            b"S" => Ok(Fetched::Superseded),
            b"G" => Ok(Fetched::Gone),
            b"O" => {
                let [holder, offered, last, entries @ ..] = rest else {
                    return Err(unexpected());
                };
                let mut events = Vec::with_capacity(entries.len() / 2);
                for pair in entries.chunks(2) {
                    let [id, data] = pair else {
                        return Err(unexpected());
                    };
                    events.push((text(id)?, data.clone()));
                }
                Ok(Fetched::Events {
                    holder: text(holder)?,
                    offered: offered.as_slice() == b"1",
                    last: text(last)?,
                    events,
                })
            }
            _ => Err(unexpected()),
        }
    }

    /// Whether GET holder `holder` (`<node>:<n>`) may still append: its node's
    /// lease lives.
    pub(crate) async fn holder_alive(&self, holder: &str) -> Result<bool, McpError> {
        let (node, _) = holder.rsplit_once(':').unwrap_or((holder, ""));
        self.node
            .alive(node)
            .await
            .map_err(|e| super::unavailable(&e))
    }

    /// This node's name for reader number `n`.
    pub(crate) fn reader_name(&self, n: u64) -> String {
        format!("{}:r{n}", self.node.node())
    }
}

#[cfg(test)]
mod tests {
    use super::super::{claimed_s1, sessions_with};
    use super::*;
    use crate::compat::Reserve;
    use crate::pubsub::redis_child::{RedisChild, block_on};

    /// An entry of `XRANGE`: its id and its fields.
    type Entry = (String, Vec<(String, Vec<u8>)>);

    /// A flood of events of varied sizes keeps the newest ones within both
    /// bounds, its byte count exact; a cursor from before what is kept is a
    /// gap, one within it reads exactly what followed.
    #[test]
    fn the_history_keeps_the_newest_events_within_both_bounds_with_exact_bytes() {
        let redis = RedisChild::start();
        block_on(async {
            let sessions = sessions_with(&redis, 10).await;
            let (key, start) = claimed_s1(&sessions).await;
            let holder = sessions.holder(1);
            let mut sent = Vec::new();
            for round in 0..60u8 {
                let batch: Vec<bytes::Bytes> = (0..7u8)
                    .map(|i| {
                        let n = usize::from(round.wrapping_mul(7).wrapping_add(i)) % 97 + 1;
                        bytes::Bytes::from(vec![b'a' + (round % 26); n])
                    })
                    .collect();
                sent.extend(batch.iter().cloned());
                let kept = sessions
                    .append_events("s1", &holder, key.expires, &batch, (50, 2000))
                    .await
                    .expect("appended");
                assert!(kept);
            }
            let [ev, evb, _, _] = event_keys(&sessions.node, "s1");
            let mut range = ::redis::cmd("XRANGE");
            range.arg(&ev).arg("-").arg("+");
            let entries: Vec<Entry> = sessions.run(range).await.expect("XRANGE");
            let counted: usize = sessions.run(::redis::Cmd::get(&evb)).await.expect("GET");
            let kept: Vec<Vec<u8>> = entries
                .iter()
                .flat_map(|(_, fields)| fields.iter())
                .filter(|(f, _)| f == "d")
                .map(|(_, v)| v.clone())
                .collect();
            let bytes: usize = kept.iter().map(Vec::len).sum();
            assert_eq!(bytes, counted, "the byte count drifted");
            assert!(
                entries.len() <= 50 && bytes <= 2000,
                "{} {bytes}",
                entries.len()
            );
            let newest: Vec<Vec<u8>> = sent[sent.len() - kept.len()..]
                .iter()
                .map(|b| b.to_vec())
                .collect();
            assert_eq!(kept, newest, "not the newest events");
            // The dropped ones are the oldest: the next older would not fit.
            let dropped = sent.len() - kept.len();
            assert!(bytes + sent[dropped - 1].len() > 2000 || entries.len() == 50);

            // The start key names the newest dropped entry (the floor of
            // what may be resumed, on Redis 6.2 as on 7).
            let [_, _, evs, _] = event_keys(&sessions.node, "s1");
            let floor: String = sessions.run(::redis::Cmd::get(&evs)).await.expect("GET");
            let mut before = ::redis::cmd("XREVRANGE");
            before
                .arg(&ev)
                .arg(format!("({}", entries[0].0))
                .arg("-")
                .arg("COUNT")
                .arg(1);
            let older: Vec<Entry> = sessions.run(before).await.expect("XREVRANGE");
            assert!(older.is_empty(), "only the newest are kept");
            assert_ne!(floor, start, "the floor moved with the drops");
            let mut after_floor = ::redis::cmd("XRANGE");
            after_floor
                .arg(&ev)
                .arg(format!("({floor}"))
                .arg("+")
                .arg("COUNT")
                .arg(1);
            let next: Vec<Entry> = sessions.run(after_floor).await.expect("XRANGE");
            assert_eq!(
                next[0].0, entries[0].0,
                "the floor is just before the oldest kept"
            );
            // From the stream's start (dropped since): a gap.
            let read = sessions
                .read_events("s1", &start, "r1", 10)
                .await
                .expect("read");
            assert!(matches!(read, Fetched::Gone), "{read:?}");
            // From within what is kept: exactly what followed.
            let cursor = entries[entries.len() - 4].0.clone();
            let read = sessions
                .read_events("s1", &cursor, "r1", 10)
                .await
                .expect("read");
            let Fetched::Events { events, .. } = read else {
                panic!("{read:?}");
            };
            let got: Vec<Vec<u8>> = events.into_iter().map(|(_, d)| d).collect();
            assert_eq!(got, newest[newest.len() - 3..].to_vec());
        });
    }

    /// A claim that opens a stream and is then refused by the bounds leaves
    /// no history key without an expiry.
    #[test]
    fn a_refused_claim_leaves_no_key_without_an_expiry() {
        let redis = RedisChild::start();
        block_on(async {
            let sessions = sessions_with(&redis, 1).await;
            let expires = seal::now_ms() + 60_000;
            let first = StateKey {
                sid: "s1",
                owner: "o",
                expires,
            };
            let reserved = sessions.reserve_get(&first, 1).await.expect("reserved");
            assert!(matches!(reserved, Reserve::Reserved));
            let second = StateKey { sid: "s2", ..first };
            let refused = sessions
                .claim_events(&second, None, "r2", (false, true))
                .await;
            assert!(refused.is_err(), "{refused:?}");
            for k in event_keys(&sessions.node, "s2").into_iter().take(3) {
                let mut pttl = ::redis::cmd("PTTL");
                pttl.arg(&k);
                let ttl: i64 = sessions.run(pttl).await.expect("PTTL");
                assert_ne!(ttl, -1, "{k} has no expiry");
            }
        });
    }

    /// Once the history expired (the holder's mark still there), an id of
    /// it is a gap (410), not an id of another session (400).
    #[test]
    fn an_id_of_an_expired_history_is_a_gap() {
        let redis = RedisChild::start();
        block_on(async {
            let sessions = sessions_with(&redis, 10).await;
            let key = StateKey {
                sid: "s1",
                owner: "o",
                expires: seal::now_ms() + 60_000,
            };
            let reserved = sessions.reserve_get(&key, 1).await.expect("reserved");
            assert!(matches!(reserved, Reserve::Reserved));
            let claimed = sessions
                .claim_events(&key, None, "r1", (false, true))
                .await
                .expect("claimed");
            let Claim::Claimed { head, .. } = claimed else {
                panic!("{claimed:?}");
            };
            let [ev, evb, evs, _] = event_keys(&sessions.node, "s1");
            let mut del = ::redis::cmd("DEL");
            del.arg(&ev).arg(&evb).arg(&evs);
            let _: i64 = sessions.run(del).await.expect("DEL");
            let claim = sessions
                .claim_events(&key, Some(&head), "r2", (false, false))
                .await
                .expect("claimed");
            assert!(matches!(claim, Claim::Gone), "{claim:?}");
        });
    }
}
