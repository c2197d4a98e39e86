//! An owner's bounds across nodes: its sessions and URIs counted in Redis.

use super::super::StateKey;
use super::SharedSessions;
use super::scripts::{OWNER_ADMIT, all_keys, eval, owner_keys};
use crate::protocol::McpError;
use crate::suite::sealing::seal;

/// The member of a URI in its owner's set.
pub(super) fn uri_member(sid: &str, uri: &str) -> String {
    format!("{sid} {uri}")
}

fn retry_after(first_expiry: i64) -> u64 {
    u64::try_from(first_expiry)
        .unwrap_or(0)
        .saturating_sub(seal::now_ms())
        .div_ceil(1000)
        .max(1)
}

impl SharedSessions {
    /// Counts the session (and `uri`, if any) under its owner; `Ok(true)`
    /// when the URI member was new.
    pub(super) async fn admit(
        &self,
        session: &StateKey<'_>,
        uri: Option<&str>,
    ) -> Result<bool, McpError> {
        let keys = owner_keys(&self.node, session.owner);
        let args = [
            session.sid.to_owned(),
            session.expires.to_string(),
            seal::now_ms().to_string(),
            self.bounds.per_owner_sessions.to_string(),
            uri.map(|u| uri_member(session.sid, u)).unwrap_or_default(),
            self.bounds.per_owner_uris.to_string(),
        ];
        let answer: Vec<i64> = self.run(eval(OWNER_ADMIT, &keys, &args)).await?;
        match answer.as_slice() {
            [0, added] => {
                self.admit_in_all(args).await?;
                Ok(*added == 1)
            }
            [1, first] => Err(McpError::limit_exceeded(
                "max_sessions_per_principal",
                format!(
                    "Too many sessions with state: at most {} per principal (or per client address without one); retry later",
                    self.bounds.per_owner_sessions
                ),
                retry_after(*first),
            )),
            [2, first] => Err(McpError::limit_exceeded(
                "max_subscribed_uris_per_principal",
                format!(
                    "Too many resource subscriptions: at most {} per principal (or per client address without one), across its sessions; retry later",
                    self.bounds.per_owner_uris
                ),
                retry_after(*first),
            )),
            _ => Err(McpError::internal(
                "Internal error: unexpected answer from the shared session store",
            )),
        }
    }

    /// Counts the session (and its URI member) in the fleet's sets, within
    /// the global bounds (the same script as an owner's, on the fleet's
    /// keys): past them `-32603` "Server busy", as on one node.
    async fn admit_in_all(&self, mut args: [String; 6]) -> Result<(), McpError> {
        args[3] = self.bounds.max_sessions.to_string();
        args[5] = self.bounds.max_uris.to_string();
        let keys = all_keys(&self.node);
        let answer: Vec<i64> = self.run(eval(OWNER_ADMIT, &keys, &args)).await?;
        match answer.as_slice() {
            [0, _] => Ok(()),
            [1, _] => Err(McpError::internal(
                "Server busy: too many sessions hold state; retry later",
            )),
            [2, _] => Err(McpError::internal(
                "Server busy: too many resource subscriptions; retry later",
            )),
            _ => Err(McpError::internal(
                "Internal error: unexpected answer from the shared session store",
            )),
        }
    }

    /// Removes members of the owner's sets and the fleet's (best effort: they
    /// expire anyway).
    pub(super) async fn forget(&self, owner: &str, sid: Option<&str>, uris: &[String]) {
        self.forget_in(owner_keys(&self.node, owner), sid, uris)
            .await;
        self.forget_in(all_keys(&self.node), sid, uris).await;
    }

    async fn forget_in(
        &self,
        [sids_key, uris_key]: [String; 2],
        sid: Option<&str>,
        uris: &[String],
    ) {
        if !uris.is_empty() {
            let mut cmd = ::redis::cmd("ZREM");
            cmd.arg(uris_key);
            for member in uris {
                cmd.arg(member);
            }
            if let Err(e) = self.run::<i64>(cmd).await {
                tracing::debug!(error = %e, "a URI count not lowered");
            }
        }
        if let Some(sid) = sid {
            let mut cmd = ::redis::cmd("ZREM");
            cmd.arg(sids_key).arg(sid);
            if let Err(e) = self.run::<i64>(cmd).await {
                tracing::debug!(error = %e, "a session count not lowered");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_retry_is_at_least_a_second_away() {
        assert_eq!(retry_after(0), 1);
        let later = i64::try_from(seal::now_ms() + 10_500).unwrap_or(i64::MAX);
        assert!((10..=11).contains(&retry_after(later)));
    }
}
