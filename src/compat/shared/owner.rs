//! An owner's bounds across nodes (and the fleet's): the arguments every
//! script checks them with, and the answer to a refusal.

use super::super::StateKey;
use super::SharedSessions;
use super::scripts::{eval, keys};
use crate::protocol::McpError;
use crate::suite::sealing::seal;

fn retry_after(first_expiry: i64) -> u64 {
    u64::try_from(first_expiry)
        .unwrap_or(0)
        .saturating_sub(seal::now_ms())
        .div_ceil(1000)
        .max(1)
}

impl SharedSessions {
    /// Runs `script` on the session's keys with the bounds' arguments
    /// (see `scripts::prelude`) followed by `extra`; its answer, or the
    /// refusal of a bound it reports.
    pub(super) async fn run_counted(
        &self,
        script: &str,
        session: &StateKey<'_>,
        extra: &[String],
    ) -> Result<Vec<String>, McpError> {
        self.run_counted_with(script, session, &[], extra).await
    }

    /// [`Self::run_counted`] with `more_keys` after the six counted ones.
    pub(super) async fn run_counted_with(
        &self,
        script: &str,
        session: &StateKey<'_>,
        more_keys: &[String],
        extra: &[String],
    ) -> Result<Vec<String>, McpError> {
        let mut keys = keys(&self.node, session.sid, session.owner).to_vec();
        keys.extend_from_slice(more_keys);
        let mut args = vec![
            session.sid.to_owned(),
            session.expires.to_string(),
            seal::now_ms().to_string(),
            self.bounds.per_owner_sessions.to_string(),
            self.bounds.per_owner_uris.to_string(),
            self.bounds.max_sessions.to_string(),
            self.bounds.max_uris.to_string(),
        ];
        args.extend_from_slice(extra);
        let answer: Vec<String> = self.run(eval(script, &keys, &args)).await?;
        match answer.as_slice() {
            [code, first] if matches!(code.as_str(), "O" | "U" | "S" | "A") => {
                Err(self.refusal(code, first.parse().unwrap_or(0)))
            }
            _ => Ok(answer),
        }
    }

    /// The answer to a request past a bound: the owner's (429 with
    /// `Retry-After`, until its first entry expires) or the fleet's
    /// (`-32603` "Server busy", as on one node).
    fn refusal(&self, code: &str, first: i64) -> McpError {
        match code {
            "O" => McpError::limit_exceeded(
                "max_sessions_per_principal",
                format!(
                    "Too many sessions with state: at most {} per principal (or per client address without one); retry later",
                    self.bounds.per_owner_sessions
                ),
                retry_after(first),
            ),
            "U" => McpError::limit_exceeded(
                "max_subscribed_uris_per_principal",
                format!(
                    "Too many resource subscriptions: at most {} per principal (or per client address without one), across its sessions; retry later",
                    self.bounds.per_owner_uris
                ),
                retry_after(first),
            ),
            "S" => McpError::internal("Server busy: too many sessions hold state; retry later"),
            _ => McpError::internal("Server busy: too many resource subscriptions; retry later"),
        }
    }
}

/// The answer to a script's reply of another shape.
pub(super) fn unexpected() -> McpError {
    McpError::internal("Internal error: unexpected answer from the shared session store")
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
