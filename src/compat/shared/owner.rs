//! An owner's bounds across nodes: its sessions and URIs counted in Redis.

use super::super::StateKey;
use super::SharedSessions;
use super::scripts::{OWNER_ADMIT, eval, owner_keys};
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
            [0, added] => Ok(*added == 1),
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

    /// Removes members of the owner's sets (best effort: they expire anyway).
    pub(super) async fn forget(&self, owner: &str, sid: Option<&str>, uris: &[String]) {
        let [sids_key, uris_key] = owner_keys(&self.node, owner);
        if !uris.is_empty() {
            let mut cmd = ::redis::cmd("ZREM");
            cmd.arg(uris_key);
            for member in uris {
                cmd.arg(member);
            }
            if let Err(e) = self.run::<i64>(cmd).await {
                tracing::debug!(error = %e, "owner's URI count not lowered");
            }
        }
        if let Some(sid) = sid {
            let mut cmd = ::redis::cmd("ZREM");
            cmd.arg(sids_key).arg(sid);
            if let Err(e) = self.run::<i64>(cmd).await {
                tracing::debug!(error = %e, "owner's session count not lowered");
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
