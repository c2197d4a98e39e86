//! A change forwarded to the node holding the session's GET stream, and how
//! its outcome is agreed on through the change's acknowledgement key
//! (`sess:{<sid>}:ack:<n>`, one per forwarded change):
//!
//! 1. the forwarding node sets it to `pending` (for [`ACK_TTL`]) before it
//!    sends the change;
//! 2. the holder claims it (`pending` → `applying`, one script) before it
//!    applies the change, and applies it only if it won; then it writes the
//!    outcome there;
//! 3. the forwarding node answers with that outcome; past its wait it
//!    withdraws the change (deletes `pending`, one script) and answers a
//!    retryable error, unless the holder claimed it first: then it waits
//!    for the outcome a while longer.
//!
//! So a change is either applied by the holder or withdrawn, never both,
//! whatever the delays: a holder that hears the change late (paused, or its
//! control subscription back after an outage) finds the key withdrawn or
//! expired, and does not apply it.

use std::time::Duration;

use serde_json::Value;

use super::control::Control;
use super::{SharedSessions, unavailable};
use crate::protocol::McpError;
use crate::suite::sealing::seal;

/// How long an acknowledgement key lives: longer than any wait for it.
const ACK_TTL: Duration = Duration::from_secs(30);
/// How long the forwarding node waits for an outcome once the holder has
/// claimed the change (it is being applied).
const CLAIMED_WAIT: Duration = Duration::from_secs(8);

/// Claims a pending change for the holder: `1` when it won.
const CLAIM: &str = r#"
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('SET', KEYS[1], ARGV[2], 'PXAT', ARGV[3])
  return 1
end
return 0
"#;

/// Withdraws a pending change: `1` when it is withdrawn (or its key is gone),
/// `0` when the holder claimed it first.
const WITHDRAW: &str = r#"
local v = redis.call('GET', KEYS[1])
if (not v) or v == ARGV[1] then
  redis.call('DEL', KEYS[1])
  return 1
end
return 0
"#;

const PENDING: &str = "\"pending\"";
const APPLYING: &str = "\"applying\"";

/// Why a forwarded change was not confirmed.
pub(crate) struct Unconfirmed {
    /// The client's answer.
    pub(crate) error: McpError,
    /// Whether the change is known not to have been applied (refused by the
    /// holder, or withdrawn): the session's recorded state goes back.
    pub(crate) undo: bool,
}

/// The error of a change the holder never applied.
fn not_applied() -> McpError {
    McpError::internal(
        "Internal error: the node holding this session's GET stream did not apply the change in time; nothing changed, retry",
    )
}

/// The error of a change the holder claimed but did not report in time.
fn not_reported() -> McpError {
    McpError::internal(
        "Internal error: the change was not confirmed by the node holding this session's GET stream in time; retry",
    )
}

impl SharedSessions {
    /// Sends `control` to the node holding the stream (`holder` as
    /// [`Self::change_uri`] returned it). `Ok(false)` when it is held here
    /// (the caller applies it) or by nobody. An error says whether the
    /// change is known not to be applied ([`Unconfirmed::undo`]): a send
    /// that failed may still have reached the holder, and when it cannot be
    /// withdrawn either, its outcome is not known.
    pub(crate) async fn forward(
        &self,
        holder: &str,
        control: Control,
    ) -> Result<bool, Unconfirmed> {
        let Some((node, _)) = holder.rsplit_once(':') else {
            return Ok(false);
        };
        if node == self.node.node() {
            return Ok(false);
        }
        let ack = match &control {
            Control::Uri { ack, .. } => Some(ack.clone()),
            Control::Delete { .. } | Control::Cut { .. } => None,
        };
        if let Some(ack) = &ack {
            // Nothing sent yet: known not applied.
            self.node
                .keys()
                .put(ack, PENDING.as_bytes(), seal::expiry(ACK_TTL))
                .await
                .map_err(|e| Unconfirmed {
                    error: unavailable(&e),
                    undo: true,
                })?;
        }
        let Err(error) = self.send(node, control).await else {
            return Ok(true);
        };
        // A failed publish may still have reached the holder: withdrawn, it
        // will not be applied; claimed already, its outcome is waited for;
        // neither known (Redis did not answer), it may be applied later.
        match &ack {
            Some(ack) => match self.withdraw(ack).await {
                Ok(false) => Ok(true),
                Ok(true) => Err(Unconfirmed { error, undo: true }),
                Err(unknown) => Err(unknown),
            },
            None => Err(Unconfirmed { error, undo: true }),
        }
    }

    /// The node holding `holder`'s stream, when it is another node.
    pub(crate) fn elsewhere<'a>(&self, holder: &'a str) -> Option<&'a str> {
        holder
            .rsplit_once(':')
            .map(|(node, _)| node)
            .filter(|node| *node != self.node.node())
    }

    /// A fresh name for the outcome of one forwarded change of `sid`.
    pub(crate) fn new_ack(&self, sid: &str) -> String {
        format!("sess:{{{sid}}}:ack:{}", super::fresh_name())
    }

    /// The holder's side, before it applies a forwarded URI change: whether
    /// it may (it claimed the change; `false` when the forwarding node
    /// withdrew it, it expired, or Redis cannot say).
    pub(crate) async fn claim(&self, ack: &str) -> bool {
        let keys = [self.node.keys().key(ack)];
        let args = [
            PENDING.to_owned(),
            APPLYING.to_owned(),
            seal::expiry(ACK_TTL).to_string(),
        ];
        match self
            .run::<i64>(super::scripts::eval(CLAIM, &keys, &args))
            .await
        {
            Ok(won) => won == 1,
            Err(_) => false,
        }
    }

    /// The holder's side: records the outcome of a forwarded change for the
    /// node that forwarded it.
    pub(crate) async fn applied(&self, ack: &str, outcome: &Result<(), McpError>) {
        let value = match outcome {
            Ok(()) => Value::from("ok"),
            Err(e) => serde_json::json!({"code": e.code(), "message": e.to_string()}),
        };
        if let Err(e) = self
            .node
            .keys()
            .put(ack, value.to_string().as_bytes(), seal::expiry(ACK_TTL))
            .await
        {
            tracing::debug!(error = %e, "outcome of a forwarded change not recorded");
        }
    }

    /// The forwarding node's side of a URI change: waits (`within`) for the
    /// holder to apply it, so that the response follows it as on one node.
    /// `Ok` once the holder applied it. Past `within` the change is
    /// withdrawn (the holder will not apply it), unless the holder claimed
    /// it: then its outcome is waited for a while longer.
    pub(crate) async fn wait_applied(
        &self,
        ack: &str,
        within: Duration,
    ) -> Result<(), Unconfirmed> {
        let start = tokio::time::Instant::now();
        let (until, last) = (start + within, start + within + CLAIMED_WAIT);
        loop {
            let now = tokio::time::Instant::now();
            match self.node.keys().get(ack).await {
                Ok(Some(bytes)) => match std::str::from_utf8(&bytes).unwrap_or("") {
                    PENDING if now >= until => {
                        if self.withdraw(ack).await? {
                            return Err(Unconfirmed {
                                error: not_applied(),
                                undo: true,
                            });
                        }
                    }
                    APPLYING if now >= last => {
                        return Err(Unconfirmed {
                            error: not_reported(),
                            undo: false,
                        });
                    }
                    PENDING | APPLYING => {}
                    _ => return outcome(&bytes),
                },
                // Expired (it lives far longer than this wait): not applied.
                Ok(None) => {
                    return Err(Unconfirmed {
                        error: not_applied(),
                        undo: true,
                    });
                }
                Err(e) => {
                    // The holder may still claim it: withdraw it if Redis
                    // answers again at once, else its outcome is unknown.
                    let withdrawn = self.withdraw(ack).await.unwrap_or(false);
                    return Err(Unconfirmed {
                        error: unavailable(&e),
                        undo: withdrawn,
                    });
                }
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// Withdraws a pending change: `Ok(true)` when it is withdrawn, `Ok(false)`
    /// when the holder claimed it first.
    async fn withdraw(&self, ack: &str) -> Result<bool, Unconfirmed> {
        let keys = [self.node.keys().key(ack)];
        match self
            .run::<i64>(super::scripts::eval(WITHDRAW, &keys, &[PENDING.to_owned()]))
            .await
        {
            Ok(withdrawn) => Ok(withdrawn == 1),
            Err(error) => Err(Unconfirmed { error, undo: false }),
        }
    }

    /// The forwarding node's side of a DELETE: waits (`within`) for the
    /// holder to confirm it ended the session's GET stream. The session is
    /// deleted either way (its mark is in Redis): an error here only says
    /// that the stream's end is not confirmed yet.
    pub(crate) async fn wait_ended(&self, ack: &str, within: Duration) -> Result<(), McpError> {
        let until = tokio::time::Instant::now() + within;
        while tokio::time::Instant::now() < until {
            match self.node.keys().get(ack).await {
                Ok(Some(_)) => return Ok(()),
                Ok(None) => {}
                Err(e) => return Err(unavailable(&e)),
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        Err(McpError::internal(
            "Internal error: the session is deleted, but the node holding its GET stream has not confirmed ending it yet (it ends within seconds); retry the DELETE (404 once it is done)",
        ))
    }
}

/// The holder's recorded outcome.
fn outcome(bytes: &[u8]) -> Result<(), Unconfirmed> {
    let value: Value = serde_json::from_slice(bytes).unwrap_or(Value::Null);
    if value == "ok" {
        return Ok(());
    }
    let message = value["message"]
        .as_str()
        .unwrap_or("Internal error: the subscription handler refused the change")
        .to_owned();
    let error = if value["code"] == -32602 {
        McpError::invalid_params(message)
    } else {
        McpError::internal(message)
    };
    Err(Unconfirmed { error, undo: true })
}
