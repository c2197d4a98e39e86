//! What a session sets at run time, shared by every node: its level, its
//! URIs, its deleted mark.

use super::super::{LegacyStream, StateKey};
use super::SharedSessions;
use super::control::Control;
use super::owner::uri_member;
use super::scripts::{CHANGE_URI, DELETE, SET_LEVEL, eval, session_keys};
use crate::protocol::{LogLevel, McpError};

/// How long a DELETE waits for the node holding the session's GET stream to
/// confirm it ended it.
const DELETE_WAIT: std::time::Duration = std::time::Duration::from_secs(2);

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
}

impl SharedSessions {
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

    /// Sets the session's log level, for requests on every node.
    pub(crate) async fn set_log_level(
        &self,
        session: &StateKey<'_>,
        level: LogLevel,
    ) -> Result<(), McpError> {
        self.admit(session, None).await?;
        let text = serde_json::to_value(level)
            .ok()
            .and_then(|v| v.as_str().map(str::to_owned))
            .unwrap_or_default();
        let keys = session_keys(&self.node, session.sid);
        let _: i64 = self
            .run(eval(SET_LEVEL, &keys, &[text, session.expires.to_string()]))
            .await?;
        Ok(())
    }

    /// Adds or removes one URI of the session. Returns whether the set
    /// changed and who holds its GET stream (`<node>:<n>`, empty for nobody).
    pub(crate) async fn change_uri(
        &self,
        session: &StateKey<'_>,
        uri: &str,
        subscribe: bool,
        max_per_session: usize,
    ) -> Result<(bool, String), McpError> {
        let added = if subscribe {
            self.admit(session, Some(uri)).await?
        } else {
            false
        };
        let keys = session_keys(&self.node, session.sid);
        let args = [
            uri.to_owned(),
            if subscribe { "1" } else { "0" }.to_owned(),
            max_per_session.to_string(),
            session.expires.to_string(),
        ];
        let answer: Vec<String> = self.run(eval(CHANGE_URI, &keys, &args)).await?;
        let [changed, holder, empty] = answer.as_slice() else {
            return Err(McpError::internal(
                "Internal error: unexpected answer from the shared session store",
            ));
        };
        let member = [uri_member(session.sid, uri)];
        match changed.as_str() {
            "-2" => {
                if added {
                    self.forget(session.owner, None, &member).await;
                }
                Err(McpError::invalid_params(format!(
                    "Invalid params: a session subscribes to at most {max_per_session} resources"
                )))
            }
            "-1" => {
                if added {
                    self.forget(session.owner, None, &member).await;
                }
                Ok((false, String::new()))
            }
            changed => {
                if !subscribe {
                    let sid = (empty == "1").then_some(session.sid);
                    self.forget(session.owner, sid, &member).await;
                }
                Ok((changed == "1", holder.clone()))
            }
        }
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
        self.admit(session, None).await?;
        let keys = session_keys(&self.node, session.sid);
        let answer: Vec<String> = self
            .run(eval(DELETE, &keys, &[session.expires.to_string()]))
            .await?;
        let holder = answer.get(1).cloned().unwrap_or_default();
        let members: Vec<String> = answer
            .iter()
            .skip(2)
            .map(|u| uri_member(session.sid, u))
            .collect();
        self.forget(session.owner, None, &members).await;
        let local = self
            .lock()
            .remove(session.sid)
            .and_then(|s| s.live)
            .filter(LegacyStream::alive);
        if let Some(node) = self.elsewhere(&holder) {
            // Answered once the holder ended the stream: the session is
            // deleted either way, but a success means nothing streams.
            let ack = self.new_ack(session.sid);
            let control = Control::Delete {
                sid: session.sid.to_owned(),
                ack: Some(ack.clone()),
            };
            self.send(node, control).await?;
            self.wait_ended(&ack, DELETE_WAIT).await?;
        }
        Ok(Deleted { local })
    }
}
