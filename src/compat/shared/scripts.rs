//! The sessions' keys in Redis, and the Lua scripts that change them (each
//! touching the keys of one hash slot).

use crate::suite::tasks::SharedTasks;

pub(super) fn session_keys(node: &SharedTasks, sid: &str) -> [String; 2] {
    [
        node.keys().key(&format!("sess:{{{sid}}}")),
        node.keys().key(&format!("sess:{{{sid}}}:uris")),
    ]
}

pub(super) fn owner_keys(node: &SharedTasks, owner: &str) -> [String; 2] {
    [
        node.keys().key(&format!("sess-owner:{{{owner}}}:sids")),
        node.keys().key(&format!("sess-owner:{{{owner}}}:uris")),
    ]
}

/// The fleet's sessions with state and their URIs (one slot: the global
/// bounds, `max_session_states` and `max_subscribed_uris`, hold across every
/// node).
pub(super) fn all_keys(node: &SharedTasks) -> [String; 2] {
    [
        node.keys().key("sess-all:{sessions}:sids"),
        node.keys().key("sess-all:{sessions}:uris"),
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

/// Admits a session (and one URI member) under its owner's bounds.
/// Returns `{0, added}`, or `{1, first expiry}` / `{2, first expiry}` when
/// the owner's sessions / URIs are at their bound.
pub(super) const OWNER_ADMIT: &str = r#"
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
pub(super) const SET_LEVEL: &str = r#"
if redis.call('HGET', KEYS[1], 'd') then return 0 end
redis.call('HSET', KEYS[1], 'l', ARGV[1])
redis.call('PEXPIREAT', KEYS[1], ARGV[2])
return 1
"#;

/// Adds (`ARGV[2] == '1'`) or removes one URI: `{changed, holder, empty}`,
/// `changed` being `-1` for a deleted session and `-2` past the session's
/// bound.
pub(super) const CHANGE_URI: &str = r#"
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
pub(super) const RESERVE_GET: &str = r#"
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
pub(super) const HOLDS_GET: &str = r#"
if redis.call('HGET', KEYS[1], 'd') then return 0 end
if redis.call('HGET', KEYS[1], 'h') == ARGV[1] then return 1 end
return 0
"#;

/// Lets go of the GET stream if `ARGV[1]` holds it; `1` when the session
/// holds nothing any more.
pub(super) const RELEASE_GET: &str = r#"
if redis.call('HGET', KEYS[1], 'h') == ARGV[1] then redis.call('HDEL', KEYS[1], 'h') end
if redis.call('EXISTS', KEYS[1]) == 0 and redis.call('EXISTS', KEYS[2]) == 0 then return 1 end
return 0
"#;

/// Marks the session deleted until `ARGV[1]`, dropping its level, URIs and
/// holder: `{first ('1'/'0'), holder, uris...}`.
pub(super) const DELETE: &str = r#"
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
