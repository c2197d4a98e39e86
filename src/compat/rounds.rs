//! Server-to-client requests of a 2025 session: the multi round-trip rounds
//! of a unary request, asked of the client as JSON-RPC requests.
//!
//! A tool (prompt, resource read) that needs input returns an MRTR round
//! (`resultType: "input_required"`) exactly as for a 2026-07-28 client. Here
//! each of the round's `inputRequests` becomes a JSON-RPC request (id
//! `genmcp-<random>`) written on the request's outbox; the transport hands the
//! client's answer to [`Pending::answer`], and once every answer is in, the
//! request runs again with `inputResponses` and the sealed `requestState`, as
//! a 2026-07-28 client would retry it. Waiting answers are bounded
//! ([`Pending`]), each entry removed when its request ends, whatever the
//! outcome (cancelled included).

use std::collections::HashMap;
use std::panic::AssertUnwindSafe;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use futures_util::FutureExt as _;
use serde_json::{Map, Value, json};
use tokio::sync::oneshot;

use crate::mux::{Channel, Frame, Outbox};
use crate::protocol::McpError;
use crate::subscription::SubscriptionHandler;
use crate::suite::Suite;

/// Rounds of one request at most (each a set of server-to-client requests).
const MAX_ROUNDS: usize = 16;

/// A client's JSON-RPC response, as received.
type Answer = Map<String, Value>;

type Waiters = HashMap<String, (String, oneshot::Sender<Answer>)>;

/// Server-to-client requests waiting for the client's answer, at most `max`.
pub(crate) struct Pending {
    max: usize,
    waiting: Mutex<Waiters>,
}

/// Removes its entry from [`Pending`] when dropped.
struct Waiting<'a> {
    pending: &'a Pending,
    id: String,
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.pending.lock().remove(&self.id);
    }
}

impl Pending {
    /// At most `max` (at least 1) answers waited for at once.
    pub(crate) fn new(max: usize) -> Self {
        Pending {
            max: max.max(1),
            waiting: Mutex::new(HashMap::new()),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Waiters> {
        self.waiting.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn register(
        &self,
        owner: &str,
        id: String,
    ) -> Result<(oneshot::Receiver<Answer>, Waiting<'_>), McpError> {
        let (tx, rx) = oneshot::channel();
        let mut waiting = self.lock();
        if waiting.len() >= self.max {
            return Err(McpError::internal(
                "Server busy: too many requests wait for client input; retry later",
            ));
        }
        waiting.insert(id.clone(), (owner.to_owned(), tx));
        Ok((rx, Waiting { pending: self, id }))
    }

    /// Hands a client's response to the request waiting for it (only one of
    /// the same `owner`); unknown ids are ignored.
    pub(crate) fn answer(&self, owner: &str, id: &Value, response: Answer) {
        let Some(id) = id.as_str() else { return };
        let mut waiting = self.lock();
        if waiting.get(id).is_some_and(|(o, _)| o == owner)
            && let Some((_, tx)) = waiting.remove(id)
        {
            let _ = tx.send(response);
        }
    }
}

/// Who is asked: the waiting answers, the session they belong to, and its
/// negotiated version.
#[derive(Clone)]
pub(crate) struct Asker {
    /// Where answers are waited for.
    pub(crate) pending: Arc<Pending>,
    /// The session (owner of the answers).
    pub(crate) owner: String,
    /// The negotiated version (2025-06-18 elicitation has no modes).
    pub(crate) version: String,
}

/// Calls the suite until the result is not `input_required`, asking the
/// client for each round's input in between (requests written on `outbox`).
/// Each call, and each wait for an answer, is bounded by `timeout`.
pub(crate) async fn rounds<H: SubscriptionHandler>(
    suite: &Suite<H>,
    asker: &Asker,
    method: &str,
    mut params: Map<String, Value>,
    channel: &Channel,
    outbox: &Outbox,
    timeout: Duration,
) -> Result<Map<String, Value>, McpError> {
    for _ in 0..MAX_ROUNDS {
        let future = suite.call(method, params.clone(), channel.clone());
        let result =
            match tokio::time::timeout(timeout, AssertUnwindSafe(future).catch_unwind()).await {
                Ok(Ok(result)) => result?,
                Ok(Err(_)) => {
                    tracing::error!(method = %method, "request handler panicked");
                    return Err(McpError::internal("Internal error: request handler failed"));
                }
                Err(_) => return Err(McpError::internal(crate::runtime::TIMED_OUT)),
            };
        if result.get("resultType").and_then(Value::as_str) != Some("input_required") {
            return Ok(result);
        }
        let requests = match result.get("inputRequests") {
            Some(Value::Object(r)) => r.clone(),
            _ => Map::new(),
        };
        let mut waits = Vec::with_capacity(requests.len());
        for (key, request) in requests {
            let input_method = request
                .get("method")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned();
            let mut input_params = request.get("params").cloned().unwrap_or_else(|| json!({}));
            if asker.version == "2025-06-18"
                && input_method == "elicitation/create"
                && let Some(p) = input_params.as_object_mut()
                && p.get("mode").and_then(Value::as_str) == Some("form")
            {
                p.remove("mode");
            }
            let rid = format!(
                "genmcp-{:016x}{:016x}",
                suite.sealer().nonce(),
                suite.sealer().nonce()
            );
            let (rx, guard) = asker.pending.register(&asker.owner, rid.clone())?;
            let bytes = serde_json::to_vec(&json!({
                "jsonrpc": "2.0",
                "id": rid,
                "method": input_method,
                "params": input_params,
            }))
            .unwrap_or_default();
            let permit = outbox
                .reserve()
                .await
                .map_err(|_| McpError::internal("Internal error: the client has gone"))?;
            permit.send(Frame::message(bytes));
            waits.push((key, input_method, rx, guard));
        }
        let mut answers = Map::new();
        for (key, input_method, rx, _guard) in waits {
            let answer = match tokio::time::timeout(timeout, rx).await {
                Ok(Ok(answer)) => answer,
                Ok(Err(_)) => return Err(McpError::internal("Internal error: input lost")),
                Err(_) => {
                    return Err(McpError::internal(format!(
                        "Request timed out waiting for the client's answer to {input_method}"
                    )));
                }
            };
            match answer.get("result") {
                Some(Value::Object(result)) => {
                    answers.insert(key, Value::Object(result.clone()));
                }
                _ if input_method == "elicitation/create" => {
                    answers.insert(key, json!({"action": "cancel"}));
                }
                _ => {
                    let message = answer
                        .get("error")
                        .and_then(|e| e.get("message"))
                        .and_then(Value::as_str)
                        .unwrap_or("no result");
                    return Err(McpError::internal(format!(
                        "The client refused {input_method}: {message}"
                    )));
                }
            }
        }
        params.insert("inputResponses".into(), Value::Object(answers));
        match result.get("requestState") {
            Some(state) => {
                params.insert("requestState".into(), state.clone());
            }
            None => {
                params.remove("requestState");
            }
        }
    }
    Err(McpError::internal(format!(
        "Internal error: more than {MAX_ROUNDS} rounds of client input"
    )))
}
