//! What a session sets at run time, shared by every node: its level, its
//! URIs, its deleted mark.

use std::sync::Arc;

use super::super::{EndClaims, LegacyStream, StateKey};
use super::SharedSessions;
use super::control::Control;
use super::owner::unexpected;
use super::scripts::{
    CHANGE_URI, DELETE, SET_LEVEL, end_key, event_keys, post_event_keys, session_keys,
};
use crate::protocol::{LogLevel, McpError};
use crate::suite::tasks::SharedTasks;

/// How long a DELETE waits for the node holding the session's GET stream to
/// confirm it ended it.
const DELETE_WAIT: std::time::Duration = std::time::Duration::from_secs(2);

/// How long a session's end claim outlives the session's expiry: the node
/// that began the session claims it at the expiry, by its own clock (a
/// little late under load, or behind the DELETE node's clock).
const END_CLAIM_GRACE: std::time::Duration = std::time::Duration::from_secs(600);

/// Claims the end of the session `sid` (expiring at `expires`, ms since the
/// epoch) for the fleet's metrics: `SET NX` of its end key, which lives
/// until [`END_CLAIM_GRACE`] after the expiry. `Ok(true)` for the first claim.
/// It runs on the bus's reserved path: the expiry clock claims one at a
/// time, and must not be refused while requests hold every permit.
async fn claim_end(node: &SharedTasks, sid: &str, expires: u64) -> Result<bool, McpError> {
    let mut cmd = ::redis::cmd("SET");
    cmd.arg(end_key(node, sid))
        .arg("1")
        .arg("NX")
        .arg("PX")
        .arg(end_claim_ttl(expires));
    node.keys()
        .query_reserved::<Option<String>>(cmd)
        .await
        .map(|set| set.is_some())
        .map_err(|e| super::unavailable(&e))
}

/// How long a session's end claim lives from now (ms): until
/// [`END_CLAIM_GRACE`] after its expiry.
fn end_claim_ttl(expires: u64) -> u64 {
    expires
        .saturating_sub(crate::suite::sealing::seal::now_ms())
        .saturating_add(u64::try_from(END_CLAIM_GRACE.as_millis()).unwrap_or(u64::MAX))
}

/// A URI change as [`SharedSessions::change_uri`] recorded it.
pub(crate) struct UriRecorded {
    /// Whether the session's set changed.
    pub(crate) changed: bool,
    /// Who holds the session's GET stream (`<node>:<n>`, empty for nobody).
    pub(crate) holder: String,
    /// The change's token, to undo it ([`SharedSessions::undo_uri`]).
    pub(crate) token: String,
}

/// What one request reads of its session.
#[derive(Debug, Default)]
pub(crate) struct Loaded {
    /// The session was DELETEd (on any node).
    pub(crate) deleted: bool,
    /// Its `logging/setLevel` level.
    pub(crate) level: Option<LogLevel>,
}

/// What DELETE found.
pub(crate) struct Deleted {
    /// The GET stream held on this node, for the caller to stop.
    pub(crate) local: Option<LegacyStream>,
    /// Whether this DELETE claimed the session's end for the metrics (no
    /// other DELETE and not its expiry did first): it records it.
    pub(crate) ends: bool,
    /// Whether the node holding the session's GET stream confirmed it ended
    /// it (the session is deleted either way).
    pub(crate) confirmed: Result<(), McpError>,
}

impl SharedSessions {
    /// Claims sessions' ends through `node` alone, as their expiry records
    /// them: for the session clock, which outlives any borrow. `Ok(true)`
    /// for the first claim in the fleet, `Ok(false)` when a DELETE claimed
    /// it, `Err` when Redis cannot answer.
    pub(crate) fn end_claims(node: SharedTasks) -> EndClaims {
        Arc::new(move |sid: String, expires: u64| {
            let node = node.clone();
            Box::pin(async move { claim_end(&node, &sid, expires).await })
        })
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

    /// Sets the session's log level, for requests on every node (the
    /// session counted under its owner's and the fleet's bounds in the same
    /// step).
    pub(crate) async fn set_log_level(
        &self,
        session: &StateKey<'_>,
        level: LogLevel,
    ) -> Result<(), McpError> {
        let text = serde_json::to_value(level)
            .ok()
            .and_then(|v| v.as_str().map(str::to_owned))
            .unwrap_or_default();
        self.run_counted(SET_LEVEL, session, &[text]).await?;
        Ok(())
    }

    /// Adds or removes one URI of the session, checked against every bound
    /// and counted in one atomic step (racing changes keep the counts
    /// exact). Returns whether the set changed, who holds its GET stream
    /// (`<node>:<n>`, empty for nobody), and the change's token (for
    /// [`Self::undo_uri`]).
    pub(crate) async fn change_uri(
        &self,
        session: &StateKey<'_>,
        uri: &str,
        subscribe: bool,
        max_per_session: usize,
    ) -> Result<UriRecorded, McpError> {
        let token = super::fresh_name();
        let answer = self
            .record_uri(session, uri, subscribe, max_per_session, &token, "")
            .await?;
        let [changed, holder] = answer.as_slice() else {
            return Err(unexpected());
        };
        match changed.as_str() {
            "-2" => Err(McpError::invalid_params(format!(
                "Invalid params: a session subscribes to at most {max_per_session} resources"
            ))),
            "-1" | "-3" => Ok(UriRecorded {
                changed: false,
                holder: String::new(),
                token,
            }),
            changed => Ok(UriRecorded {
                changed: changed == "1",
                holder: holder.clone(),
                token,
            }),
        }
    }

    /// Undoes the change of `uri` recorded with `token` (it asked for
    /// `subscribe`), only while it is still the session's last change:
    /// `Ok(false)` when another change of the session was recorded since
    /// (that one stands, and with it this one: undoing it then could erase
    /// a newer change of the URI).
    pub(crate) async fn undo_uri(
        &self,
        session: &StateKey<'_>,
        uri: &str,
        subscribe: bool,
        max_per_session: usize,
        token: &str,
    ) -> Result<bool, McpError> {
        let undo = super::fresh_name();
        let answer = self
            .record_uri(session, uri, !subscribe, max_per_session, &undo, token)
            .await?;
        match answer.first().map(String::as_str) {
            Some("0" | "1") => Ok(true),
            Some("-1" | "-3") => Ok(false),
            Some("-2") => Err(McpError::internal(
                "Internal error: the session's URI bound refused the undo",
            )),
            _ => Err(unexpected()),
        }
    }

    async fn record_uri(
        &self,
        session: &StateKey<'_>,
        uri: &str,
        subscribe: bool,
        max_per_session: usize,
        token: &str,
        expected: &str,
    ) -> Result<Vec<String>, McpError> {
        let args = [
            uri.to_owned(),
            if subscribe { "1" } else { "0" }.to_owned(),
            max_per_session.to_string(),
            token.to_owned(),
            expected.to_owned(),
        ];
        let last = self
            .node
            .keys()
            .key(&format!("sess:{{sessions}}:{}:uv", session.sid));
        self.run_counted_with(CHANGE_URI, session, &[last], &args)
            .await
    }

    /// Whether the session's set has `uri` now, as Redis records it.
    pub(crate) async fn is_subscribed(&self, sid: &str, uri: &str) -> Result<bool, McpError> {
        let [_, set] = session_keys(&self.node, sid);
        let mut cmd = ::redis::cmd("SISMEMBER");
        cmd.arg(set).arg(uri);
        let member: i64 = self.run(cmd).await?;
        Ok(member == 1)
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

    /// Ends the session everywhere: remembered as deleted until its token
    /// expires (every node answers 404), its level and URIs dropped, and
    /// its GET stream ended: returned when it is held here, else its node is
    /// told, and answers once that node confirmed it ended the stream (an
    /// error when it did not within [`DELETE_WAIT`]: the session is deleted
    /// all the same). Refused, like any new state, when its owner is at its
    /// bound.
    pub(crate) async fn delete(&self, session: &StateKey<'_>) -> Result<Deleted, McpError> {
        let [ev, evb, evs, evr] = event_keys(&self.node, session.sid);
        let [pev, pevb, pevs, pevw, posts] = post_event_keys(&self.node, session.sid);
        let history = [
            end_key(&self.node, session.sid),
            ev,
            evb,
            evs,
            evr,
            pev,
            pevb,
            pevs,
            pevw,
        ];
        let ttl = [end_claim_ttl(session.expires).to_string()];
        let answer = self
            .run_counted_with(DELETE, session, &history, &ttl)
            .await?;
        // Its POST history no longer counts against the fleet's bound (an
        // error leaves its entry to lapse with the history's expiry).
        let mut forget = ::redis::cmd("ZREM");
        forget.arg(posts).arg(session.sid);
        if let Err(error) = self.run::<i64>(forget).await {
            tracing::debug!(%error, "a deleted session's POST history left to lapse from the fleet's count");
        }
        let [_, _, holder, claimed] = answer.as_slice() else {
            return Err(unexpected());
        };
        let ends = claimed == "1";
        let local = self
            .lock()
            .remove(session.sid)
            .and_then(|s| s.live)
            .filter(LegacyStream::alive);
        let mut confirmed = Ok(());
        // A holder whose node is gone (no lease) runs no stream to end: not
        // waited for (were it only paused, it stops that stream at its next
        // check of its mark, which this DELETE dropped).
        let holder_node = match self.elsewhere(holder) {
            Some(node) if !matches!(self.node.alive(node).await, Ok(false)) => Some(node),
            _ => None,
        };
        if let Some(node) = holder_node {
            // Answered once the holder ended the stream: the session is
            // deleted either way, but a success means nothing streams.
            let ack = self.new_ack(session.sid);
            let control = Control::Delete {
                sid: session.sid.to_owned(),
                ack: Some(ack.clone()),
            };
            confirmed = match self.send(node, control).await {
                Ok(()) => self.wait_ended(&ack, DELETE_WAIT).await,
                Err(e) => Err(e),
            };
        }
        Ok(Deleted {
            local,
            ends,
            confirmed,
        })
    }
}
