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
use crate::runtime::RequestOutcome;
use crate::subscription::SubscriptionHandler;
use crate::suite::Suite;

/// Rounds of one request at most (each a set of server-to-client requests).
const MAX_ROUNDS: usize = 16;

/// A client's JSON-RPC response, as received.
type Answer = Map<String, Value>;

/// One waiting answer: the session it belongs to, the principal it counts
/// against, and where the answer goes.
struct Waiter {
    owner: String,
    principal: String,
    tx: oneshot::Sender<Answer>,
}

/// The waiting answers, and how many each principal has.
#[derive(Default)]
struct Waiters {
    by_id: HashMap<String, Waiter>,
    per_principal: HashMap<String, usize>,
}

impl Waiters {
    fn remove(&mut self, id: &str) -> Option<Waiter> {
        let waiter = self.by_id.remove(id)?;
        if let Some(n) = self.per_principal.get_mut(&waiter.principal) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                self.per_principal.remove(&waiter.principal);
            }
        }
        Some(waiter)
    }
}

/// Server-to-client requests waiting for the client's answer: at most `max`
/// in all, and at most `per_principal` of one principal (or one client
/// address without one), so that one principal cannot take the whole table.
pub(crate) struct Pending {
    max: usize,
    per_principal: usize,
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
    /// At most `max` (at least 1) answers waited for at once, at most
    /// `per_principal` (at least 1) of one principal.
    pub(crate) fn new(max: usize, per_principal: usize) -> Self {
        Pending {
            max: max.max(1),
            per_principal: per_principal.max(1),
            waiting: Mutex::new(Waiters::default()),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Waiters> {
        self.waiting.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Waits for the answer to request `id` of session `owner`, counted
    /// against `principal`.
    fn register(
        &self,
        owner: &str,
        principal: &str,
        id: String,
    ) -> Result<(oneshot::Receiver<Answer>, Waiting<'_>), McpError> {
        let (tx, rx) = oneshot::channel();
        let mut waiting = self.lock();
        let held = waiting.per_principal.get(principal).copied().unwrap_or(0);
        if held >= self.per_principal {
            return Err(McpError::internal(format!(
                "Server busy: at most {} requests per principal may wait for client input at once; answer or cancel one, then retry",
                self.per_principal
            )));
        }
        if waiting.by_id.len() >= self.max {
            return Err(McpError::internal(
                "Server busy: too many requests wait for client input; retry later",
            ));
        }
        *waiting
            .per_principal
            .entry(principal.to_owned())
            .or_insert(0) += 1;
        let waiter = Waiter {
            owner: owner.to_owned(),
            principal: principal.to_owned(),
            tx,
        };
        waiting.by_id.insert(id.clone(), waiter);
        Ok((rx, Waiting { pending: self, id }))
    }

    /// Hands a client's response to the request waiting for it (only one of
    /// the same `owner`); unknown ids are ignored.
    pub(crate) fn answer(&self, owner: &str, id: &Value, response: Answer) {
        let Some(id) = id.as_str() else { return };
        let mut waiting = self.lock();
        if waiting.by_id.get(id).is_some_and(|w| w.owner == owner)
            && let Some(waiter) = waiting.remove(id)
        {
            let _ = waiter.tx.send(response);
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
    /// The principal (or client address without one) its waiting answers
    /// count against.
    pub(crate) principal: String,
    /// The negotiated version (2025-06-18 elicitation has no modes).
    pub(crate) version: String,
}

/// Calls the suite until the result is not `input_required`, asking the
/// client for each round's input in between (requests written on `outbox`).
/// Each call, and each wait for an answer, is bounded by `timeout`. Returns
/// the result or the error to answer, and how the request is counted
/// (`genmcp_requests_total`, its span): a handler's error as `error` (or
/// `limited` with a retry delay), a panic as `panicked`, a deadline passed
/// as `timeout`, as for a 2026 request.
pub(crate) async fn rounds<H: SubscriptionHandler>(
    suite: &Suite<H>,
    asker: &Asker,
    method: &str,
    params: Map<String, Value>,
    channel: &Channel,
    outbox: &Outbox,
    timeout: Duration,
) -> (Result<Map<String, Value>, McpError>, RequestOutcome) {
    match run(suite, asker, method, params, channel, outbox, timeout).await {
        Ok(result) => (Ok(result), RequestOutcome::Ok),
        Err(Failed { error, outcome }) => (Err(error), outcome),
    }
}

/// Why the rounds ended without a result, and how that is counted.
struct Failed {
    error: McpError,
    outcome: RequestOutcome,
}

impl From<McpError> for Failed {
    fn from(error: McpError) -> Self {
        let outcome = RequestOutcome::of_error(&error);
        Failed { error, outcome }
    }
}

impl Failed {
    fn timed_out(error: McpError) -> Self {
        Failed {
            error,
            outcome: RequestOutcome::Timeout,
        }
    }
}

async fn run<H: SubscriptionHandler>(
    suite: &Suite<H>,
    asker: &Asker,
    method: &str,
    mut params: Map<String, Value>,
    channel: &Channel,
    outbox: &Outbox,
    timeout: Duration,
) -> Result<Map<String, Value>, Failed> {
    for _ in 0..MAX_ROUNDS {
        let future = suite.call(method, params.clone(), channel.clone());
        let result =
            match tokio::time::timeout(timeout, AssertUnwindSafe(future).catch_unwind()).await {
                Ok(Ok(result)) => result?,
                Ok(Err(_)) => {
                    tracing::error!(method = %method, "request handler panicked");
                    return Err(Failed {
                        error: McpError::internal("Internal error: request handler failed"),
                        outcome: RequestOutcome::Panicked,
                    });
                }
                Err(_) => {
                    return Err(Failed::timed_out(McpError::internal(
                        crate::runtime::TIMED_OUT,
                    )));
                }
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
            let (rx, guard) =
                asker
                    .pending
                    .register(&asker.owner, &asker.principal, rid.clone())?;
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
                Ok(Err(_)) => return Err(McpError::internal("Internal error: input lost").into()),
                Err(_) => {
                    return Err(Failed::timed_out(McpError::internal(format!(
                        "Request timed out waiting for the client's answer to {input_method}"
                    ))));
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
                    ))
                    .into());
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
    ))
    .into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_principal_cannot_take_the_whole_table() {
        let pending = Pending::new(4, 2);
        let a1 = pending.register("s1", "alice", "1".into());
        let a2 = pending.register("s2", "alice", "2".into());
        assert!(a1.is_ok() && a2.is_ok());
        let refused = pending.register("s1", "alice", "3".into());
        assert!(
            refused
                .err()
                .is_some_and(|e| e.to_string().contains("per principal"))
        );
        // Another principal still has room, up to the whole table.
        let b1 = pending.register("s3", "bob", "4".into());
        let b2 = pending.register("s3", "bob", "5".into());
        assert!(b1.is_ok() && b2.is_ok());
        assert!(pending.register("s4", "carol", "6".into()).is_err());
        // An answered (or ended) wait gives its principal's room back.
        drop(a1);
        assert_eq!(pending.lock().per_principal.get("alice"), Some(&1));
        drop(b1);
        assert!(pending.register("s1", "alice", "7".into()).is_ok());
    }
}
