//! The sessions' keys in Redis, and the Lua scripts that change them.
//!
//! Every key of the sessions' state shares one hash slot (`{sessions}`), so
//! that each script checks every bound it touches and counts what it adds in
//! one atomic step: the session's own keys, its owner's counts and the
//! fleet's. (The fleet's counts are one slot anyway: every request that adds
//! state already went through it.)

use crate::suite::tasks::SharedTasks;

/// The keys every script gets: the session's hash and URI set, its owner's
/// sessions and URIs, the fleet's sessions and URIs.
pub(super) fn keys(node: &SharedTasks, sid: &str, owner: &str) -> [String; 6] {
    let k = |name: String| node.keys().key(&name);
    [
        k(format!("sess:{{sessions}}:{sid}")),
        k(format!("sess:{{sessions}}:{sid}:uris")),
        k(format!("sess-owner:{{sessions}}:{owner}:sids")),
        k(format!("sess-owner:{{sessions}}:{owner}:uris")),
        k("sess-all:{sessions}:sids".to_owned()),
        k("sess-all:{sessions}:uris".to_owned()),
    ]
}

/// The session's hash and URI set only.
pub(super) fn session_keys(node: &SharedTasks, sid: &str) -> [String; 2] {
    [
        node.keys().key(&format!("sess:{{sessions}}:{sid}")),
        node.keys().key(&format!("sess:{{sessions}}:{sid}:uris")),
    ]
}

/// The session's end claim (same slot as its hash): set once, by the first
/// node to record the session's end in its metrics.
pub(super) fn end_key(node: &SharedTasks, sid: &str) -> String {
    node.keys().key(&format!("sess:{{sessions}}:{sid}:end"))
}

/// The session's GET stream history (same slot as its hash): the Redis
/// stream of its events, the bytes of their messages, the entry id its
/// current stream started at, and the reader writing it now.
pub(super) fn event_keys(node: &SharedTasks, sid: &str) -> [String; 4] {
    let k = |suffix: &str| {
        node.keys()
            .key(&format!("sess:{{sessions}}:{sid}:{suffix}"))
    };
    [k("ev"), k("evb"), k("evs"), k("evr")]
}

/// The session's POST streams' history (same slot as its hash): the Redis
/// stream of their events, the bytes of their messages, the oldest entry id
/// a cursor may name, and each stream's writer; then the fleet's sorted set
/// of sessions with such a history (scored by its expiry).
pub(super) fn post_event_keys(node: &SharedTasks, sid: &str) -> [String; 5] {
    let k = |suffix: &str| {
        node.keys()
            .key(&format!("sess:{{sessions}}:{sid}:{suffix}"))
    };
    [
        k("pev"),
        k("pevb"),
        k("pevs"),
        k("pevw"),
        node.keys().key("sess-all:{sessions}:pev"),
    ]
}

pub(super) fn eval(script: &str, keys: &[String], args: &[String]) -> ::redis::Cmd {
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

/// What every script starts with. KEYS as [`keys`]; ARGV[1] the session id,
/// ARGV[2] its expiry, ARGV[3] now (ms), ARGV[4..7] the owner's bounds on
/// sessions and URIs, then the fleet's; the script's own arguments follow.
///
/// `admit(member)` checks every bound for the session (and the URI member
/// `member`, if any) and only then counts them: `nil` when admitted, else
/// `{code, first expiry}` (`O`/`U`: the owner's sessions/URIs, `S`/`A`: the
/// fleet's), nothing counted; `check(member)` is its check alone. `forget_if_empty()` uncounts the session once
/// it holds nothing.
macro_rules! prelude {
    () => {
        r#"
local sid, exp, now = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
for i = 3, 6 do redis.call('ZREMRANGEBYSCORE', KEYS[i], '-inf', now) end
local function fmt(x) return string.format('%.0f', x) end
local function first(key)
  local f = redis.call('ZRANGE', key, 0, 0, 'WITHSCORES')
  return tonumber(f[2] or exp)
end
local function check(member)
  local new_o = not redis.call('ZSCORE', KEYS[3], sid)
  local new_a = not redis.call('ZSCORE', KEYS[5], sid)
  if new_o and redis.call('ZCARD', KEYS[3]) >= tonumber(ARGV[4]) then return {'O', first(KEYS[3])} end
  if new_a and redis.call('ZCARD', KEYS[5]) >= tonumber(ARGV[6]) then return {'S', 0} end
  if member then
    local new_ou = not redis.call('ZSCORE', KEYS[4], member)
    local new_au = not redis.call('ZSCORE', KEYS[6], member)
    if new_ou and redis.call('ZCARD', KEYS[4]) >= tonumber(ARGV[5]) then return {'U', first(KEYS[4])} end
    if new_au and redis.call('ZCARD', KEYS[6]) >= tonumber(ARGV[7]) then return {'A', 0} end
  end
  return nil
end
local function admit(member)
  local refused = check(member)
  if refused then return refused end
  if member then
    redis.call('ZADD', KEYS[4], exp, member)
    redis.call('ZADD', KEYS[6], exp, member)
  end
  redis.call('ZADD', KEYS[3], exp, sid)
  redis.call('ZADD', KEYS[5], exp, sid)
  for i = 3, 6 do
    local ttl = redis.call('PTTL', KEYS[i])
    if ttl ~= -2 and (ttl < 0 or now + ttl < exp) then redis.call('PEXPIREAT', KEYS[i], exp) end
  end
  return nil
end
local function forget_if_empty(owner_known)
  if redis.call('EXISTS', KEYS[1]) == 0 and redis.call('EXISTS', KEYS[2]) == 0 then
    if owner_known then redis.call('ZREM', KEYS[3], sid) end
    redis.call('ZREM', KEYS[5], sid)
  end
end
"#
    };
}

pub(super) use prelude;

/// Shared by the scripts: a stream's head and highest dropped id, and the
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

pub(super) use stream_prelude;

/// Sets the level (ARGV[8]) unless the session was deleted: `{'1'}` when
/// set, `{'0'}` when deleted, or a refusal of `admit`.
pub(super) const SET_LEVEL: &str = concat!(
    prelude!(),
    r#"
if redis.call('HGET', KEYS[1], 'd') then return {'0'} end
local r = admit(nil)
if r then return {r[1], fmt(r[2])} end
redis.call('HSET', KEYS[1], 'l', ARGV[8])
redis.call('PEXPIREAT', KEYS[1], exp)
return {'1'}
"#
);

/// Adds (`ARGV[9] == '1'`) or removes the URI ARGV[8], counted with it in
/// the same step: `{changed, holder}`, `changed` being `-1` for a deleted
/// session, `-2` past the session's own bound (ARGV[10]) and `-3` when
/// ARGV[12] is not empty and is not the session's last change (KEYS[7], the
/// token of the last change of any of its URIs: ARGV[11] is this one's), or
/// a refusal of `admit`.
pub(super) const CHANGE_URI: &str = concat!(
    prelude!(),
    r#"
if redis.call('HGET', KEYS[1], 'd') then return {'-1', ''} end
if ARGV[12] ~= '' and redis.call('GET', KEYS[7]) ~= ARGV[12] then return {'-3', ''} end
local uri = ARGV[8]
local member = sid .. ' ' .. uri
local changed = 0
if ARGV[9] == '1' then
  if redis.call('SISMEMBER', KEYS[2], uri) == 0 then
    local r = check(member)
    if r then return {r[1], fmt(r[2])} end
    if redis.call('SCARD', KEYS[2]) >= tonumber(ARGV[10]) then return {'-2', ''} end
    r = admit(member)
    if r then return {r[1], fmt(r[2])} end
    redis.call('SADD', KEYS[2], uri)
    redis.call('PEXPIREAT', KEYS[2], exp)
    changed = 1
  end
else
  changed = redis.call('SREM', KEYS[2], uri)
  redis.call('ZREM', KEYS[4], member)
  redis.call('ZREM', KEYS[6], member)
  forget_if_empty(true)
end
if changed == 1 then redis.call('SET', KEYS[7], ARGV[11], 'PXAT', fmt(exp)) end
return {tostring(changed), redis.call('HGET', KEYS[1], 'h') or ''}
"#
);

/// Takes the GET stream for ARGV[8] when nobody holds it or its holder is
/// ARGV[9]: `{'R'}` (taken), `{'D'}` (deleted), `{'H', holder}`, or a
/// refusal of `admit`.
pub(super) const RESERVE_GET: &str = concat!(
    prelude!(),
    r#"
if redis.call('HGET', KEYS[1], 'd') then return {'D'} end
local h = redis.call('HGET', KEYS[1], 'h')
if h and h ~= ARGV[9] then return {'H', h} end
local r = admit(nil)
if r then return {r[1], fmt(r[2])} end
redis.call('HSET', KEYS[1], 'h', ARGV[8])
-- A new holder: no handoff of the old one's stands.
redis.call('HDEL', KEYS[1], 'ho', 'hc', 'hn', 'he', 'hv', 'hl', 'hd')
redis.call('PEXPIREAT', KEYS[1], exp)
return {'R'}
"#
);

/// `1` when ARGV[1] still holds the GET stream of an undeleted session
/// (KEYS: the session's hash).
pub(super) const HOLDS_GET: &str = r#"
if redis.call('HGET', KEYS[1], 'd') then return 0 end
if redis.call('HGET', KEYS[1], 'h') == ARGV[1] then return 1 end
return 0
"#;

/// Lets go of the GET stream if ARGV[8] holds it, and uncounts the session
/// once it holds nothing (under its owner too when ARGV[9] is `1`): `{'1'}`
/// (a list, as every script run through `run_counted` answers).
pub(super) const RELEASE_GET: &str = concat!(
    prelude!(),
    r#"
if redis.call('HGET', KEYS[1], 'h') == ARGV[8] then
  redis.call('HDEL', KEYS[1], 'h', 'ho', 'hc', 'hn', 'he', 'hv', 'hl', 'hd')
end
forget_if_empty(ARGV[9] == '1')
return {'1'}
"#
);

/// Marks the session deleted until its expiry, dropping its level, URIs
/// (and their counts), holder and event history (KEYS after the seventh),
/// and claims its end for the metrics (KEYS[7], `SET NX PX` ARGV[8] ms);
/// the mark still counts as its state:
/// `{'ok', first ('1'/'0'), holder, end claimed ('1'/'0')}`, or a refusal
/// of `admit`.
pub(super) const DELETE: &str = concat!(
    prelude!(),
    r#"
local first = '0'
if not redis.call('HGET', KEYS[1], 'd') then
  first = '1'
  local r = admit(nil)
  if r then return {r[1], fmt(r[2])} end
end
local h = redis.call('HGET', KEYS[1], 'h') or ''
for _, uri in ipairs(redis.call('SMEMBERS', KEYS[2])) do
  redis.call('ZREM', KEYS[4], sid .. ' ' .. uri)
  redis.call('ZREM', KEYS[6], sid .. ' ' .. uri)
end
redis.call('DEL', KEYS[1], KEYS[2])
for i = 8, #KEYS do redis.call('DEL', KEYS[i]) end
redis.call('HSET', KEYS[1], 'd', '1')
redis.call('PEXPIREAT', KEYS[1], exp)
local claimed = '0'
if redis.call('SET', KEYS[7], '1', 'NX', 'PX', ARGV[8]) then claimed = '1' end
return {'ok', first, h, claimed}
"#
);
