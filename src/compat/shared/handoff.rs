//! A session's GET stream moving from a draining node to another one, with
//! nothing lost or written twice: the draining holder *offers* the stream,
//! a node a client resumes on *prepares* to take it (it records the
//! history's newest entry, opens its own stream actor and holds its frames)
//! and asks the holder to *cut*; the holder, having handled every event
//! Redis ran before it heard the request, moves the mark to the taker only
//! if it appended nothing since the taker's record. See
//! `docs/compat-2025.md` (the fleet's GET stream on a drain).
//!
//! Fields of the session's hash: `ho` (the holder offering the stream),
//! `hc` (the taker's token), `hn` (the taker's holder name), `he` (the
//! newest entry when the taker prepared), `hv` and `hl` (the session's last
//! URI change and level then), `hd` (when the taker gives up, ms).

use super::SharedSessions;
use super::owner::unexpected;
use super::scripts::{eval, session_keys, stream_prelude};
use crate::protocol::McpError;

/// How long a taker's preparation holds the stream against other takers.
pub(crate) const TAKE_WINDOW: std::time::Duration = std::time::Duration::from_secs(5);

/// KEYS: the hash. ARGV: the holder. Offers the stream when it still holds it.
const OFFER: &str = r#"
if redis.call('HGET', KEYS[1], 'd') then return 0 end
if redis.call('HGET', KEYS[1], 'h') ~= ARGV[1] then return 0 end
redis.call('HSET', KEYS[1], 'ho', ARGV[1])
return 1
"#;

/// Milliseconds by Redis's clock (the same for every node).
macro_rules! redis_now {
    () => {
        r#"
local function redis_now()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
"#
    };
}

/// KEYS: the hash. ARGV: the holder. Withdraws its offer (a cut could no
/// longer succeed): readers stop ending for it, takers stop trying.
const UNOFFER: &str = r#"
if redis.call('HGET', KEYS[1], 'h') == ARGV[1] then redis.call('HDEL', KEYS[1], 'ho') end
return 1
"#;

/// KEYS: the hash, the events stream, the last URI change's token. ARGV:
/// the offering holder, the taker's token, its holder name, the window
/// (ms, by Redis's clock). `{'O', newest entry}`, `{'D'}` deleted, `{'N'}`
/// not offered by that holder, `{'B'}` another taker is at it.
const PREPARE: &str = concat!(
    stream_prelude!(),
    redis_now!(),
    r#"
if redis.call('HGET', KEYS[1], 'd') then return {'D'} end
local h = redis.call('HGET', KEYS[1], 'h')
if h ~= ARGV[1] or redis.call('HGET', KEYS[1], 'ho') ~= h then return {'N'} end
local now = redis_now()
local busy_until = tonumber(redis.call('HGET', KEYS[1], 'hd') or '0')
if redis.call('HGET', KEYS[1], 'hc') and busy_until > now then return {'B'} end
local newest = '0-0'
if redis.call('EXISTS', KEYS[2]) == 1 then newest = info(KEYS[2]) end
redis.call('HSET', KEYS[1], 'hc', ARGV[2], 'hn', ARGV[3], 'he', newest,
  'hv', redis.call('GET', KEYS[3]) or '', 'hl', redis.call('HGET', KEYS[1], 'l') or '',
  'hd', now + tonumber(ARGV[4]))
return {'O', newest}
"#
);

/// KEYS as [`PREPARE`]. ARGV: the holder, the taker's token, `1` to refuse.
/// Moves the mark to the taker when nothing changed since it prepared and
/// its preparation has not lapsed: `'O'` moved, `'C'` changed, lapsed or
/// refused (the taker gives up), `'N'` not this taker's (withdrawn, or
/// another's).
const CUT: &str = concat!(
    stream_prelude!(),
    redis_now!(),
    r#"
if redis.call('HGET', KEYS[1], 'd') then return 'N' end
local h = redis.call('HGET', KEYS[1], 'h')
if h ~= ARGV[1] or redis.call('HGET', KEYS[1], 'ho') ~= h then return 'N' end
if redis.call('HGET', KEYS[1], 'hc') ~= ARGV[2] then return 'N' end
local newest = '0-0'
if redis.call('EXISTS', KEYS[2]) == 1 then newest = info(KEYS[2]) end
local same = ARGV[3] ~= '1'
  and redis_now() < tonumber(redis.call('HGET', KEYS[1], 'hd') or '0')
  and newest == redis.call('HGET', KEYS[1], 'he')
  and (redis.call('GET', KEYS[3]) or '') == redis.call('HGET', KEYS[1], 'hv')
  and (redis.call('HGET', KEYS[1], 'l') or '') == redis.call('HGET', KEYS[1], 'hl')
local to = redis.call('HGET', KEYS[1], 'hn')
redis.call('HDEL', KEYS[1], 'hc', 'hn', 'he', 'hv', 'hl', 'hd')
if not same then return 'C' end
redis.call('HSET', KEYS[1], 'h', to)
redis.call('HDEL', KEYS[1], 'ho')
return 'O'
"#
);

/// KEYS: the hash. ARGV: the taker's token, its holder name. `'O'` when
/// the stream is the taker's, `'P'` while its preparation stands, else
/// `'R'` (refused, or withdrawn).
const STATE: &str = r#"
if redis.call('HGET', KEYS[1], 'h') == ARGV[2] then return 'O' end
if redis.call('HGET', KEYS[1], 'hc') == ARGV[1] then return 'P' end
return 'R'
"#;

/// KEYS: the hash. ARGV: the taker's token, its holder name. The taker
/// gives up: its preparation goes (a cut after this finds it gone). `'O'`
/// when the stream became the taker's first.
const WITHDRAW: &str = r#"
if redis.call('HGET', KEYS[1], 'h') == ARGV[2] then return 'O' end
if redis.call('HGET', KEYS[1], 'hc') == ARGV[1] then
  redis.call('HDEL', KEYS[1], 'hc', 'hn', 'he', 'hv', 'hl', 'hd')
end
return 'R'
"#;

/// What a taker's preparation found.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Prepared {
    /// Prepared: the history's newest entry then.
    Ready(String),
    /// The stream is not offered by that holder (any more).
    NotOffered,
    /// Another taker is preparing.
    Busy,
}

/// Where a taker stands.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Taking {
    /// The stream is the taker's.
    Taken,
    /// Its preparation stands: the holder has not answered yet.
    Pending,
    /// Refused or withdrawn.
    Refused,
}

/// What a holder's cut did.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Cut {
    /// The mark moved to the taker.
    Moved,
    /// Something changed since the taker prepared (or the holder refused):
    /// the taker gives up, the holder keeps the stream.
    Changed,
    /// Not this taker's preparation.
    Stale,
}

impl SharedSessions {
    fn handoff_keys(&self, sid: &str) -> [String; 3] {
        let [hash, _] = session_keys(&self.node, sid);
        let k = |suffix: &str| {
            self.node
                .keys()
                .key(&format!("sess:{{sessions}}:{sid}:{suffix}"))
        };
        [hash, k("ev"), k("uv")]
    }

    /// The draining `holder` offers the session's GET stream: whether it
    /// still held it.
    pub(crate) async fn offer_get(&self, sid: &str, holder: &str) -> Result<bool, McpError> {
        let [hash, _] = session_keys(&self.node, sid);
        let offered: i64 = self.run(eval(OFFER, &[hash], &[holder.to_owned()])).await?;
        Ok(offered == 1)
    }

    /// The draining `holder` withdraws its offer.
    pub(crate) async fn unoffer_get(&self, sid: &str, holder: &str) -> Result<(), McpError> {
        let [hash, _] = session_keys(&self.node, sid);
        let _: i64 = self
            .run(eval(UNOFFER, &[hash], &[holder.to_owned()]))
            .await?;
        Ok(())
    }

    /// A taker (`token`, holder name `to`) prepares to take the stream
    /// `from` offers.
    pub(crate) async fn prepare_take(
        &self,
        sid: &str,
        from: &str,
        token: &str,
        to: &str,
    ) -> Result<Prepared, McpError> {
        let args = [
            from.to_owned(),
            token.to_owned(),
            to.to_owned(),
            TAKE_WINDOW.as_millis().to_string(),
        ];
        let answer: Vec<String> = self
            .run(eval(PREPARE, &self.handoff_keys(sid), &args))
            .await?;
        match answer.as_slice() {
            [o, newest] if o == "O" => Ok(Prepared::Ready(newest.clone())),
            [n] if n == "N" || n == "D" => Ok(Prepared::NotOffered),
            [b] if b == "B" => Ok(Prepared::Busy),
            _ => Err(unexpected()),
        }
    }

    /// The holder `holder` cuts for the taker `token` (or refuses it).
    pub(crate) async fn cut_get(
        &self,
        sid: &str,
        holder: &str,
        token: &str,
        refuse: bool,
    ) -> Result<Cut, McpError> {
        let args = [
            holder.to_owned(),
            token.to_owned(),
            if refuse { "1" } else { "0" }.to_owned(),
        ];
        let answer: String = self.run(eval(CUT, &self.handoff_keys(sid), &args)).await?;
        match answer.as_str() {
            "O" => Ok(Cut::Moved),
            "C" => Ok(Cut::Changed),
            "N" => Ok(Cut::Stale),
            _ => Err(unexpected()),
        }
    }

    /// Where the taker `token` (holder name `to`) stands.
    pub(crate) async fn taking(
        &self,
        sid: &str,
        token: &str,
        to: &str,
    ) -> Result<Taking, McpError> {
        let [hash, _] = session_keys(&self.node, sid);
        let answer: String = self
            .run(eval(STATE, &[hash], &[token.to_owned(), to.to_owned()]))
            .await?;
        Ok(match answer.as_str() {
            "O" => Taking::Taken,
            "P" => Taking::Pending,
            _ => Taking::Refused,
        })
    }

    /// The taker gives up; whether the stream had become its own first.
    pub(crate) async fn withdraw_take(
        &self,
        sid: &str,
        token: &str,
        to: &str,
    ) -> Result<bool, McpError> {
        let [hash, _] = session_keys(&self.node, sid);
        let answer: String = self
            .run(eval(WITHDRAW, &[hash], &[token.to_owned(), to.to_owned()]))
            .await?;
        Ok(answer == "O")
    }

    /// Asks `holder`'s node to cut for the taker `token`.
    pub(crate) async fn ask_cut(
        &self,
        holder: &str,
        sid: &str,
        token: &str,
    ) -> Result<(), McpError> {
        let (node, _) = holder.rsplit_once(':').unwrap_or((holder, ""));
        self.send(
            node,
            super::Control::Cut {
                sid: sid.to_owned(),
                token: token.to_owned(),
            },
        )
        .await
    }

    /// A fresh taker's token.
    pub(crate) fn take_token(&self) -> String {
        super::fresh_name()
    }
}

#[cfg(test)]
mod tests {
    use super::super::{claimed_s1, sessions_with};
    use super::*;
    use crate::compat::StateKey;
    use crate::protocol::LogLevel;
    use crate::pubsub::redis_child::{RedisChild, block_on};

    const TAKER: &str = "taker-node:7";

    async fn hget(sessions: &SharedSessions, field: &str) -> Option<String> {
        let [hash, _] = session_keys(&sessions.node, "s1");
        sessions
            .run(::redis::Cmd::hget(hash, field))
            .await
            .expect("HGET")
    }

    /// A session whose GET stream reservation 1 holds, with a history of
    /// one event: the session's key and the holder's name.
    async fn held(sessions: &SharedSessions) -> (StateKey<'static>, String) {
        let (key, _) = claimed_s1(sessions).await;
        let holder = sessions.holder(1);
        let event = [bytes::Bytes::from_static(b"{}")];
        let appended = sessions
            .append_events("s1", &holder, key.expires, &event, (50, 2000))
            .await
            .expect("appended");
        assert!(appended);
        (key, holder)
    }

    /// The rules of the marks: a stream is taken only when its holder
    /// offered it, by one taker at a time, and moves only when nothing was
    /// appended and nothing of the session changed since the taker
    /// prepared; a refused, withdrawn or stale preparation moves nothing.
    #[test]
    fn a_cut_moves_the_stream_only_when_nothing_changed_since_the_taker_prepared() {
        let redis = RedisChild::start();
        block_on(async {
            let sessions = sessions_with(&redis, 10).await;
            let (key, holder) = held(&sessions).await;
            let event = [bytes::Bytes::from_static(b"{\"n\":2}")];
            let prepare = |token: &'static str| sessions.prepare_take("s1", &holder, token, TAKER);

            // Not offered yet; offered by its holder only.
            assert_eq!(prepare("t0").await.expect("prepare"), Prepared::NotOffered);
            assert!(!sessions.offer_get("s1", "other:1").await.expect("offer"));
            assert!(sessions.offer_get("s1", &holder).await.expect("offer"));

            // One taker at a time.
            assert!(matches!(
                prepare("t1").await.expect("prepare"),
                Prepared::Ready(_)
            ));
            assert_eq!(prepare("t2").await.expect("prepare"), Prepared::Busy);
            // An event appended since: refused; the holder keeps it.
            let appended = sessions
                .append_events("s1", &holder, key.expires, &event, (50, 2000))
                .await
                .expect("appended");
            assert!(appended);
            let cut = sessions.cut_get("s1", &holder, "t1", false).await;
            assert_eq!(cut.expect("cut"), Cut::Changed);
            assert_eq!(
                sessions.taking("s1", "t1", TAKER).await.expect("state"),
                Taking::Refused
            );
            assert_eq!(hget(&sessions, "h").await.as_deref(), Some(holder.as_str()));

            // The session's level changed since: refused.
            assert!(matches!(
                prepare("t3").await.expect("prepare"),
                Prepared::Ready(_)
            ));
            sessions
                .set_log_level(&key, LogLevel::Debug)
                .await
                .expect("level set");
            let cut = sessions.cut_get("s1", &holder, "t3", false).await;
            assert_eq!(cut.expect("cut"), Cut::Changed);

            // A URI of the session changed since: refused.
            assert!(matches!(
                prepare("t3b").await.expect("prepare"),
                Prepared::Ready(_)
            ));
            let [_, _, uv] = sessions.handoff_keys("s1");
            let _: () = sessions
                .run(::redis::Cmd::set(uv, "another-change"))
                .await
                .expect("SET");
            let cut = sessions.cut_get("s1", &holder, "t3b", false).await;
            assert_eq!(cut.expect("cut"), Cut::Changed);

            // The holder refuses: refused.
            assert!(matches!(
                prepare("t4").await.expect("prepare"),
                Prepared::Ready(_)
            ));
            let cut = sessions.cut_get("s1", &holder, "t4", true).await;
            assert_eq!(cut.expect("cut"), Cut::Changed);

            // Withdrawn before the holder cut: the cut finds it stale.
            assert!(matches!(
                prepare("t5").await.expect("prepare"),
                Prepared::Ready(_)
            ));
            assert!(
                !sessions
                    .withdraw_take("s1", "t5", TAKER)
                    .await
                    .expect("withdrawn")
            );
            let cut = sessions.cut_get("s1", &holder, "t5", false).await;
            assert_eq!(cut.expect("cut"), Cut::Stale);

            // Nothing changed: moved, once, to the taker.
            assert!(matches!(
                prepare("t6").await.expect("prepare"),
                Prepared::Ready(_)
            ));
            assert_eq!(
                sessions.taking("s1", "t6", TAKER).await.expect("state"),
                Taking::Pending
            );
            let cut = sessions.cut_get("s1", "other:1", "t6", false).await;
            assert_eq!(cut.expect("cut"), Cut::Stale);
            let cut = sessions.cut_get("s1", &holder, "t6", false).await;
            assert_eq!(cut.expect("cut"), Cut::Moved);
            assert_eq!(
                sessions.taking("s1", "t6", TAKER).await.expect("state"),
                Taking::Taken
            );
            assert!(
                sessions
                    .withdraw_take("s1", "t6", TAKER)
                    .await
                    .expect("taken")
            );
            assert_eq!(hget(&sessions, "h").await.as_deref(), Some(TAKER));
            for field in ["ho", "hc", "hn", "he", "hv", "hl", "hd"] {
                assert_eq!(hget(&sessions, field).await, None, "{field} left behind");
            }
            // The old holder can no longer append, nor let go of the
            // taker's mark, nor offer it.
            let appended = sessions
                .append_events("s1", &holder, key.expires, &event, (50, 2000))
                .await
                .expect("answered");
            assert!(!appended);
            sessions.release_get(("s1", "o"), 1, key.expires).await;
            assert_eq!(hget(&sessions, "h").await.as_deref(), Some(TAKER));
            assert!(!sessions.offer_get("s1", &holder).await.expect("offer"));
        });
    }

    /// A taker that vanished mid-way holds the stream against others only
    /// for [`TAKE_WINDOW`], and a cut after that moves nothing.
    #[test]
    fn a_vanished_takers_preparation_lapses() {
        let redis = RedisChild::start();
        block_on(async {
            let sessions = sessions_with(&redis, 10).await;
            let (_key, holder) = held(&sessions).await;
            assert!(sessions.offer_get("s1", &holder).await.expect("offer"));
            let first = sessions.prepare_take("s1", &holder, "t1", TAKER).await;
            assert!(matches!(first.expect("prepare"), Prepared::Ready(_)));
            let second = sessions.prepare_take("s1", &holder, "t2", "n2:1").await;
            assert_eq!(second.expect("prepare"), Prepared::Busy);
            tokio::time::sleep(TAKE_WINDOW + std::time::Duration::from_millis(200)).await;
            // Its cut comes too late: nothing moves.
            let cut = sessions.cut_get("s1", &holder, "t1", false).await;
            assert_eq!(cut.expect("cut"), Cut::Changed);
            assert_eq!(hget(&sessions, "h").await.as_deref(), Some(holder.as_str()));
            let third = sessions.prepare_take("s1", &holder, "t3", "n2:1").await;
            assert!(matches!(third.expect("prepare"), Prepared::Ready(_)));
            let cut = sessions.cut_get("s1", &holder, "t1", false).await;
            assert_eq!(cut.expect("cut"), Cut::Stale);
            // An offer withdrawn: no taker prepares any more.
            sessions
                .unoffer_get("s1", &holder)
                .await
                .expect("unoffered");
            let fourth = sessions.prepare_take("s1", &holder, "t4", "n3:1").await;
            assert_eq!(fourth.expect("prepare"), Prepared::NotOffered);
        });
    }
}
