//! A shared session's GET stream events in Redis Streams, so a client that
//! reconnects with `Last-Event-ID` to any node of the fleet resumes there.
//!
//! Keys (in the session's slot, beside its hash `sess:{sessions}:<sid>`):
//!
//! | key | what |
//! |---|---|
//! | `sess:{sessions}:<sid>:ev` | stream: the GET stream's events (field `d`: the JSON-RPC message), `XADD MAXLEN` the per-session event bound, `PEXPIREAT` the session's expiry |
//! | `sess:{sessions}:<sid>:evr` | string: the reader writing the stream now (`<node>:<n>`), `PX` [`READER_TTL`], renewed at every read |
//!
//! The node holding the session's GET stream appends every event it writes;
//! every response of the stream, on any node, reads the Redis stream after
//! its cursor (the entry id of the last event written): one writer, readers
//! in entry order, so each event goes out once and in order. A newer reader
//! takes the stream over (the older one ends with a `retry` hint); an id
//! older than what the stream keeps (`max-deleted-entry-id`) is a gap, never
//! skipped over; an id past the stream's head names nothing of this session.

use super::SharedSessions;
use super::scripts::{eval, session_keys};
use crate::protocol::McpError;

/// How long a reader that stopped reading still counts as the stream's.
pub(crate) const READER_TTL: std::time::Duration = std::time::Duration::from_secs(3);

/// Shared by the scripts: a stream's head and highest trimmed id, and the
/// order of two entry ids.
macro_rules! stream_prelude {
    () => {
        r#"
local function info(k)
  local i = redis.call('XINFO', 'STREAM', k)
  local last, maxdel = '0-0', '0-0'
  for j = 1, #i, 2 do
    if i[j] == 'last-generated-id' then last = i[j + 1] end
    if i[j] == 'max-deleted-entry-id' then maxdel = i[j + 1] end
  end
  return last, maxdel
end
local function lt(a, b)
  local am, as = string.match(a, '^(%d+)-(%d+)$')
  local bm, bs = string.match(b, '^(%d+)-(%d+)$')
  am, as, bm, bs = tonumber(am), tonumber(as), tonumber(bm), tonumber(bs)
  return am < bm or (am == bm and as < bs)
end
"#
    };
}

/// KEYS: the event stream. ARGV: the message, the length bound, the
/// session's expiry (ms since the epoch). Returns the entry id.
const APPEND: &str = r#"
local id = redis.call('XADD', KEYS[1], 'MAXLEN', ARGV[2], '*', 'd', ARGV[1])
redis.call('PEXPIREAT', KEYS[1], ARGV[3])
return id
"#;

/// KEYS: the event stream, the reader key, the session's hash. ARGV: the
/// cursor (`''`: the head), the reader, its TTL (ms), `1` to take the stream
/// only when it has no reader. `{'N'}` an id past the head, `{'G'}` an id
/// whose following events are trimmed, `{'B'}` a reader holds it, else
/// `{'O', head, holder}`.
const CLAIM: &str = concat!(
    stream_prelude!(),
    r#"
local head, maxdel = '0-0', '0-0'
if redis.call('EXISTS', KEYS[1]) == 1 then head, maxdel = info(KEYS[1]) end
local after = ARGV[1]
if after ~= '' then
  if not string.match(after, '^%d+-%d+$') or lt(head, after) then return {'N'} end
  if lt(after, maxdel) then return {'G'} end
end
if ARGV[4] == '1' and redis.call('EXISTS', KEYS[2]) == 1 then return {'B'} end
redis.call('SET', KEYS[2], ARGV[2], 'PX', ARGV[3])
return {'O', head, redis.call('HGET', KEYS[3], 'h') or ''}
"#
);

/// KEYS as [`CLAIM`]. ARGV: the cursor, the reader, its TTL (ms), the most
/// entries to return. `{'S'}` another reader took over, `{'G'}` events after
/// the cursor were trimmed, else `{'O', holder, id, data, id, data, ...}`.
const READ: &str = concat!(
    stream_prelude!(),
    r#"
if redis.call('GET', KEYS[2]) ~= ARGV[2] then return {'S'} end
redis.call('PEXPIRE', KEYS[2], ARGV[3])
if redis.call('EXISTS', KEYS[1]) == 1 then
  local head, maxdel = info(KEYS[1])
  if lt(ARGV[1], maxdel) then return {'G'} end
end
local out = {'O', redis.call('HGET', KEYS[3], 'h') or ''}
for _, e in ipairs(redis.call('XRANGE', KEYS[1], '(' .. ARGV[1], '+', 'COUNT', ARGV[4])) do
  out[#out + 1] = e[1]
  out[#out + 1] = e[2][2]
end
return out
"#
);

/// What a claim of the stream's reading found.
#[derive(Debug)]
pub(crate) enum Claim {
    /// Claimed: the stream's head and its GET stream's holder (`""`: none).
    Claimed {
        /// The last entry id appended (`0-0` for none).
        head: String,
        /// The session's GET stream holder (`<node>:<n>`).
        holder: String,
    },
    /// The id is past the stream's head: not an event of this session.
    NotOurs,
    /// Events after the id were trimmed.
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
        /// Entry id and message, in order.
        events: Vec<(String, Vec<u8>)>,
    },
    /// Another reader took the stream over.
    Superseded,
    /// Events after the cursor were trimmed before this reader wrote them.
    Gone,
}

fn strings(parts: &[Vec<u8>]) -> Option<Vec<String>> {
    parts
        .iter()
        .map(|p| String::from_utf8(p.clone()).ok())
        .collect()
}

impl SharedSessions {
    fn event_keys(&self, sid: &str) -> [String; 3] {
        let [hash, _] = session_keys(&self.node, sid);
        [
            self.node.keys().key(&format!("sess:{{sessions}}:{sid}:ev")),
            self.node
                .keys()
                .key(&format!("sess:{{sessions}}:{sid}:evr")),
            hash,
        ]
    }

    /// Appends one event of the session's GET stream, kept at most
    /// `max_len` entries; its entry id.
    pub(crate) async fn append_event(
        &self,
        sid: &str,
        expires: u64,
        data: &[u8],
        max_len: usize,
    ) -> Result<String, McpError> {
        let [ev, _, _] = self.event_keys(sid);
        let mut cmd = eval(APPEND, &[ev], &[]);
        cmd.arg(data).arg(max_len.max(1)).arg(expires);
        self.run(cmd).await
    }

    /// Whether a reader holds the session's event stream.
    pub(crate) async fn has_event_reader(&self, sid: &str) -> Result<bool, McpError> {
        let [_, evr, _] = self.event_keys(sid);
        let n: i64 = self.run(::redis::Cmd::exists(evr)).await?;
        Ok(n == 1)
    }

    /// Makes `reader` the one of the session's event stream, after checking
    /// `after` (an entry id, or `None` for the head); with `only_if_free`,
    /// only when no reader holds it.
    pub(crate) async fn claim_events(
        &self,
        sid: &str,
        after: Option<&str>,
        reader: &str,
        only_if_free: bool,
    ) -> Result<Claim, McpError> {
        let keys = self.event_keys(sid);
        let args = [
            after.unwrap_or("").to_owned(),
            reader.to_owned(),
            READER_TTL.as_millis().to_string(),
            if only_if_free { "1" } else { "0" }.to_owned(),
        ];
        let answer: Vec<Vec<u8>> = self.run(eval(CLAIM, &keys, &args)).await?;
        let parts = strings(&answer).ok_or_else(super::owner::unexpected)?;
        Ok(match parts.as_slice() {
            [n] if n == "N" => Claim::NotOurs,
            [g] if g == "G" => Claim::Gone,
            [b] if b == "B" => Claim::Busy,
            [o, head, holder] if o == "O" => Claim::Claimed {
                head: head.clone(),
                holder: holder.clone(),
            },
            _ => return Err(super::owner::unexpected()),
        })
    }

    /// Reads at most `count` events after `after` for `reader` (renewing its
    /// hold on the stream).
    pub(crate) async fn read_events(
        &self,
        sid: &str,
        after: &str,
        reader: &str,
        count: usize,
    ) -> Result<Fetched, McpError> {
        let keys = self.event_keys(sid);
        let args = [
            after.to_owned(),
            reader.to_owned(),
            READER_TTL.as_millis().to_string(),
            count.max(1).to_string(),
        ];
        let answer: Vec<Vec<u8>> = self.run(eval(READ, &keys, &args)).await?;
        let Some((code, rest)) = answer.split_first() else {
            return Err(super::owner::unexpected());
        };
        match code.as_slice() {
            b"S" => Ok(Fetched::Superseded),
            b"G" => Ok(Fetched::Gone),
            b"O" => {
                let Some((holder, entries)) = rest.split_first() else {
                    return Err(super::owner::unexpected());
                };
                let holder =
                    String::from_utf8(holder.clone()).map_err(|_| super::owner::unexpected())?;
                let mut events = Vec::with_capacity(entries.len() / 2);
                for pair in entries.chunks(2) {
                    let [id, data] = pair else {
                        return Err(super::owner::unexpected());
                    };
                    let id =
                        String::from_utf8(id.clone()).map_err(|_| super::owner::unexpected())?;
                    events.push((id, data.clone()));
                }
                Ok(Fetched::Events { holder, events })
            }
            _ => Err(super::owner::unexpected()),
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
