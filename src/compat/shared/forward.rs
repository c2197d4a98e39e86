//! A URI change forwarded to the node holding the session's GET stream, and
//! the outcome it sends back.

use serde_json::Value;

use super::control::Control;
use super::{SharedSessions, unavailable};
use crate::protocol::McpError;
use crate::suite::sealing::seal;

impl SharedSessions {
    /// Sends `control` to the node holding the stream (`holder` as
    /// [`Self::change_uri`] returned it). `Ok(false)` when it is held here
    /// (the caller applies it) or by nobody.
    pub(crate) async fn forward(&self, holder: &str, control: Control) -> Result<bool, McpError> {
        let Some((node, _)) = holder.rsplit_once(':') else {
            return Ok(false);
        };
        if node == self.node.node() {
            return Ok(false);
        }
        self.send(node, control).await?;
        Ok(true)
    }

    /// A fresh name for the outcome of one forwarded change of `sid`.
    pub(crate) fn new_ack(&self, sid: &str) -> String {
        let mut bytes = [0u8; 8];
        let n = if getrandom::fill(&mut bytes).is_ok() {
            u64::from_le_bytes(bytes)
        } else {
            seal::now_ms()
        };
        format!("sess:{{{sid}}}:ack:{n:016x}")
    }

    /// The holder's side: records the outcome of a forwarded change (kept
    /// 10 s) for the node that forwarded it.
    pub(crate) async fn applied(&self, ack: &str, outcome: &Result<(), McpError>) {
        let value = match outcome {
            Ok(()) => Value::from("ok"),
            Err(e) => serde_json::json!({"code": e.code(), "message": e.to_string()}),
        };
        let expires = seal::expiry(std::time::Duration::from_secs(10));
        if let Err(e) = self
            .node
            .keys()
            .put(ack, value.to_string().as_bytes(), expires)
            .await
        {
            tracing::debug!(error = %e, "outcome of a forwarded URI change not recorded");
        }
    }

    /// The forwarding node's side: waits (at most `within`) for the holder
    /// to apply the change, so that the response follows it as on one node.
    /// `Ok` when it was applied or no outcome came in time (the change is
    /// recorded either way); the holder's error when it refused it.
    pub(crate) async fn wait_applied(
        &self,
        ack: &str,
        within: std::time::Duration,
    ) -> Result<(), McpError> {
        let until = tokio::time::Instant::now() + within;
        while tokio::time::Instant::now() < until {
            match self.node.keys().get(ack).await {
                Ok(Some(bytes)) => {
                    let value: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
                    if value == "ok" {
                        return Ok(());
                    }
                    let message = value["message"]
                        .as_str()
                        .unwrap_or("Internal error: the subscription handler refused the change")
                        .to_owned();
                    return Err(if value["code"] == -32602 {
                        McpError::invalid_params(message)
                    } else {
                        McpError::internal(message)
                    });
                }
                Ok(None) => {}
                Err(e) => return Err(unavailable(&e)),
            }
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        tracing::debug!("a forwarded URI change was not confirmed in time");
        Ok(())
    }
}
