//! Unary requests of a 2025-era session, and the server-to-client requests of
//! their multi round-trip rounds.
//!
//! A tool (prompt, resource read) that needs input returns an MRTR round
//! (`resultType: "input_required"`) exactly as for a 2026-07-28 client. Here
//! each of the round's `inputRequests` becomes a JSON-RPC request written on
//! the POST's SSE response; the client POSTs its answer (202), and once every
//! answer is in, the request is run again with `inputResponses` and the sealed
//! `requestState`, as a 2026-07-28 client would retry it. The waiting answers
//! are in [`Pending`], bounded by `CompatConfig::max_pending_requests`, each
//! entry removed when its request ends, whatever the outcome.

use std::collections::HashMap;
use std::panic::AssertUnwindSafe;
use std::sync::{Arc, Mutex};

use actix_web::HttpResponse;
use futures_util::FutureExt as _;
use serde_json::{Map, Value, json};
use tokio::sync::{OwnedSemaphorePermit, oneshot};

use super::session::Session;
use super::{AppState, Compat, encode_legacy_error, legacy_error, legacy_result};
use crate::mux::{Channel, Frame, Outbox, OutboxReceiver};
use crate::protocol::McpError;
use crate::protocol::jsonrpc::encode_result;
use crate::subscription::SubscriptionHandler;
use crate::transport::dispatch::TIMED_OUT;
use crate::transport::http::sse::{AbortOnDrop, SseBody};

/// Rounds of one request at most (each a set of server-to-client requests).
const MAX_ROUNDS: usize = 16;

type Answer = Map<String, Value>;

/// Server-to-client requests waiting for the client's answer.
pub(super) struct Pending {
    max: usize,
    waiting: Mutex<HashMap<String, (String, oneshot::Sender<Answer>)>>,
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
    pub(super) fn new(max: usize) -> Self {
        Pending {
            max: max.max(1),
            waiting: Mutex::new(HashMap::new()),
        }
    }

    fn lock(
        &self,
    ) -> std::sync::MutexGuard<'_, HashMap<String, (String, oneshot::Sender<Answer>)>> {
        self.waiting.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn register(
        &self,
        session: &Session,
        id: String,
    ) -> Result<(oneshot::Receiver<Answer>, Waiting<'_>), McpError> {
        let (tx, rx) = oneshot::channel();
        let mut waiting = self.lock();
        if waiting.len() >= self.max {
            return Err(McpError::internal(
                "Server busy: too many requests wait for client input; retry later",
            ));
        }
        waiting.insert(id.clone(), (session.sid.clone(), tx));
        Ok((rx, Waiting { pending: self, id }))
    }

    /// Hands a client's response to the request waiting for it (only one of
    /// the same session); unknown ids are ignored.
    pub(super) fn answer(&self, session: &Session, id: &Value, response: Answer) {
        let Some(id) = id.as_str() else { return };
        let mut waiting = self.lock();
        if waiting.get(id).is_some_and(|(sid, _)| *sid == session.sid)
            && let Some((_, tx)) = waiting.remove(id)
        {
            let _ = tx.send(response);
        }
    }
}

/// One unary request of a legacy session.
pub(super) struct Call {
    pub(super) method: String,
    pub(super) params: Map<String, Value>,
    pub(super) channel: Channel,
    pub(super) outbox: Outbox,
}

/// Runs the request (its MRTR rounds as server-to-client requests) and answers
/// with JSON, or with SSE once anything precedes the response.
pub(super) async fn unary<H: SubscriptionHandler>(
    state: &AppState<H>,
    compat: Arc<Compat>,
    session: Session,
    call: Call,
    mut rx: OutboxReceiver,
    permit: OwnedSemaphorePermit,
) -> HttpResponse {
    let suite = state.suite.clone();
    let timeout = state.config.request_timeout;
    let stall = state.server.limits().stall_timeout;
    let task = actix_rt::spawn(async move {
        let _permit = permit;
        let Call {
            method,
            params,
            channel,
            outbox,
        } = call;
        let outcome = rounds(
            &suite, &compat, &session, &method, params, &channel, &outbox, timeout,
        )
        .await;
        let id = channel.id().clone();
        let bytes = match outcome {
            Ok(result) => encode_result(&id, &legacy_result(result)),
            Err(error) => encode_legacy_error(Some(&id), &legacy_error(&method, &error)),
        };
        drop(outbox);
        if tokio::time::timeout(stall, channel.respond(bytes))
            .await
            .is_err()
        {
            tracing::debug!(method = %method, "response dropped: the outbox stayed full past the stall timeout");
        }
    });
    let mut task = AbortOnDrop(Some(task));
    let Some(first) = rx.recv().await else {
        task.0.take();
        return super::json_ok(encode_legacy_error(
            None,
            &McpError::internal("Internal error: no response").to_error_object(),
        ));
    };
    if first.last {
        state.server.count_frames(1);
        return super::json_ok(first.to_bytes().to_vec());
    }
    crate::transport::http::post::sse_response(SseBody::new(
        first,
        rx,
        None,
        state.config.keep_alive,
        state.server.clone(),
        task,
    ))
}

/// Calls the suite until the result is not `input_required`, asking the
/// client for each round's input in between.
#[allow(clippy::too_many_arguments)]
async fn rounds<H: SubscriptionHandler>(
    suite: &crate::suite::Suite<H>,
    compat: &Compat,
    session: &Session,
    method: &str,
    mut params: Map<String, Value>,
    channel: &Channel,
    outbox: &Outbox,
    timeout: std::time::Duration,
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
                Err(_) => return Err(McpError::internal(TIMED_OUT)),
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
            if session.version == "2025-06-18"
                && input_method == "elicitation/create"
                && let Some(p) = input_params.as_object_mut()
                && p.get("mode").and_then(Value::as_str) == Some("form")
            {
                // 2025-06-18 elicitation has no modes.
                p.remove("mode");
            }
            let rid = format!(
                "genmcp-{:016x}{:016x}",
                suite.sealer().nonce(),
                suite.sealer().nonce()
            );
            let (rx, guard) = compat.pending.register(session, rid.clone())?;
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
