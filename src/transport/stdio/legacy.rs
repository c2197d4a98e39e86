//! A 2025-era session on a pipe (MCP 2025-11-25 and 2025-06-18): the pipe is
//! the session. Its `initialize` negotiates the version; then `ping`,
//! `logging/setLevel`, `resources/subscribe` / `unsubscribe` and the suite's
//! unary requests are served through `crate::compat`, server-to-client
//! requests (elicitation, sampling, roots) go out on stdout and their answers
//! come back on stdin, and `notifications/cancelled` aborts a request in
//! flight.
//!
//! The session's notifications (list changes as advertised, `resources/updated`
//! for its subscribed URIs) are pushed without a listen: they come from one
//! legacy stream, a `Stream` actor under the pipe's own `Connection`, opened
//! right after the `initialize` response. Its handler, bounds, back-pressure
//! and `handle_close` at EOF are those of every other stream. If it ends
//! (`Flow::Stop`, a panic, an overflow), the client's next request opens it
//! again.

use std::time::Instant;

use serde_json::{Map, Value};
use tracing::Instrument as _;

use super::{InFlight, NotRun, Pipe, send_reply};
use crate::compat::{
    self, Asker, ClientInit, LegacyRoute, LegacyStream, Pending, SessionState, encode_legacy_error,
    legacy_error, legacy_result,
};
use crate::mux::{Assigns, Channel, outbox};
use crate::protocol::jsonrpc::encode_result;
use crate::protocol::{Incoming, McpError, Request, RequestId, methods};
use crate::runtime::version_label;
use crate::runtime::{NetworkTransport, Refused, RequestOutcome, UriOutcome, method_label};
use crate::subscription::SubscriptionHandler;
use crate::transport::dispatch::{Origin, operation};

/// The one session of a 2025-era pipe: the owner of its answers.
const OWNER: &str = "stdio";

/// A 2025-era pipe's session.
pub(super) struct Session {
    init: ClientInit,
    state: SessionState,
    stream: LegacyStream,
    asker: Asker,
}

async fn reply_error<H: SubscriptionHandler>(
    pipe: &Pipe<'_, H>,
    id: Option<&RequestId>,
    method: &str,
    error: &McpError,
) {
    let bytes = encode_legacy_error(id, &legacy_error(method, error));
    send_reply(pipe.outbox, pipe.server.limits().stall_timeout, bytes).await;
}

async fn reply<H: SubscriptionHandler>(
    pipe: &Pipe<'_, H>,
    id: &RequestId,
    result: Map<String, Value>,
) {
    send_reply(
        pipe.outbox,
        pipe.server.limits().stall_timeout,
        encode_result(id, &result),
    )
    .await;
}

/// Answers the pipe's first request, a 2025 `initialize`, and opens the
/// session's legacy stream. `None` (after an error reply) if the client's
/// declarations are not usable; the pipe stays undecided.
pub(super) async fn initialize<H: SubscriptionHandler>(
    pipe: &Pipe<'_, H>,
    request: Request,
) -> Option<Session> {
    let started = Instant::now();
    let Request { id, params, .. } = request;
    let params = params.unwrap_or_default();
    let init = ClientInit::from_params(&params);
    let version = version_label(&init.version, crate::compat::LEGACY_VERSIONS);
    let meta = match init.meta(None, None) {
        Ok((_, meta)) => meta,
        Err(e) => {
            pipe.server
                .record_request("initialize", RequestOutcome::Refused, None);
            let mut refused = refused_of(version);
            refused.read("initialize", Some(&params));
            refused.set_id(&id);
            super::refuse(pipe, refused, &e, started);
            reply_error(pipe, Some(&id), "initialize", &e).await;
            return None;
        }
    };
    let (probe_tx, _probe_rx) = outbox(1);
    let probe = Channel::for_request(id.clone(), meta.clone(), Assigns::new(), probe_tx);
    let op = operation(
        pipe.suite,
        pipe.server,
        &probe,
        "initialize",
        &params,
        Origin::PIPE,
        version,
    );
    let result = compat::initialize_result(pipe.suite, &init.version, probe)
        .instrument(op.span().clone())
        .await;
    let span = op.span().clone();
    op.finish(pipe.server, Ok(&result), RequestOutcome::Ok);
    span.in_scope(|| tracing::debug!("request answered"));
    pipe.server
        .record_request("initialize", RequestOutcome::Ok, None);
    reply(pipe, &id, result).await;
    let mut session = Session {
        stream: LegacyStream::new(
            pipe.connection.clone(),
            pipe.outbox.clone(),
            meta,
            Assigns::new(),
            version,
        ),
        asker: Asker {
            // One pipe, one principal: its bound is the pipe's.
            pending: std::sync::Arc::new(Pending::new(
                pipe.config.max_pending_inputs,
                pipe.config.max_pending_inputs,
            )),
            owner: OWNER.into(),
            principal: OWNER.into(),
            version: init.version.clone(),
        },
        init,
        state: SessionState::default(),
    };
    open_stream(pipe, &mut session).await;
    Some(session)
}

async fn open_stream<H: SubscriptionHandler>(pipe: &Pipe<'_, H>, session: &mut Session) {
    let uris = session.state.uris();
    if let Err(error) = session.stream.open(pipe.suite, pipe.server, uris).await {
        tracing::debug!(%error, "2025 session stream not opened");
    }
}

/// What is known of a request of a session at version `version` before it
/// is read.
fn refused_of(version: &'static str) -> Refused {
    let mut refused = Refused::unread(NetworkTransport::Pipe, None);
    refused.version = version;
    refused
}

/// Serves one line of a 2025-era pipe.
pub(super) async fn handle_line<H: SubscriptionHandler>(
    pipe: &Pipe<'_, H>,
    session: &mut Session,
    text: &[u8],
) {
    let started = Instant::now();
    let version = version_label(&session.init.version, crate::compat::LEGACY_VERSIONS);
    let mut value: Value = match serde_json::from_slice(text) {
        Ok(v) => v,
        Err(e) => {
            let error = McpError::Parse(format!("Invalid JSON: {e}"));
            super::refuse(pipe, refused_of(version), &error, started);
            return reply_error(pipe, None, "", &error).await;
        }
    };
    if let Value::Object(msg) = &value
        && !msg.contains_key("method")
        && (msg.contains_key("result") || msg.contains_key("error"))
    {
        // The client's answer to a server-to-client request.
        if let Some(id) = msg.get("id") {
            let id = id.clone();
            if let Value::Object(msg) = value {
                session.asker.pending.answer(OWNER, &id, msg);
            }
        }
        return;
    }
    if let Value::Object(msg) = &mut value
        && msg.get("params").is_some_and(Value::is_null)
    {
        // `"params": null` is how some 2025 clients say "no params".
        msg.remove("params");
    }
    let request = match Incoming::from_value(value) {
        Ok(Incoming::Request(r)) => r,
        Ok(Incoming::Notification(n)) => {
            // `initialized` and `roots/list_changed` need nothing; a cancel
            // aborts the request in flight (no response).
            if n.method == methods::CANCELLED
                && let Some(id) = n.params.get("requestId").and_then(RequestId::from_value)
            {
                pipe.in_flight.cancel(&id);
            }
            return;
        }
        Err(e) => {
            let mut refused = refused_of(version);
            refused.read_message(text);
            if let Some(id) = &e.id {
                refused.set_id(id);
            }
            super::refuse(pipe, refused, &e.error, started);
            return reply_error(pipe, e.id.as_ref(), "", &e.error).await;
        }
    };
    if !session.stream.is_running() {
        open_stream(pipe, session).await;
    }
    let Request { id, method, params } = request;
    let label = method_label(&method);
    if let Err(NotRun { error, outcome }) = serve(
        pipe,
        session,
        id.clone(),
        &method,
        params.unwrap_or_default(),
    )
    .await
    {
        pipe.server.record_request(label, outcome, None);
        // Read again from the line: nothing is read for a request served.
        let mut refused = refused_of(version);
        refused.read_message(text);
        refused.outcome = outcome;
        super::refuse(pipe, refused, &error, started);
        reply_error(pipe, Some(&id), &method, &error).await;
    }
}

/// Serves one request; an error is the reply.
async fn serve<H: SubscriptionHandler>(
    pipe: &Pipe<'_, H>,
    session: &mut Session,
    id: RequestId,
    method: &str,
    mut params: Map<String, Value>,
) -> Result<(), NotRun> {
    if method == "initialize" {
        return Err(McpError::InvalidRequest(
            "Invalid Request: the session is already initialized".into(),
        )
        .into());
    }
    if pipe.in_flight.contains(&id) {
        return Err(McpError::InvalidRequest(format!(
            "a request with id {id} is already in flight"
        ))
        .into());
    }
    // MRTR fields belong to the server's side of the translation.
    params.remove("inputResponses");
    params.remove("requestState");
    let (meta, parsed) = session
        .init
        .meta(session.state.log_level, params.remove("_meta"))?;
    params.insert("_meta".into(), Value::Object(meta));
    let channel = Channel::for_request(id.clone(), parsed, Assigns::new(), pipe.outbox.clone());
    match compat::legacy_route(method) {
        route @ (LegacyRoute::Ping | LegacyRoute::SetLevel | LegacyRoute::Subscription(_)) => {
            // Answered here: their span and duration, as a suite's request.
            let op = operation(
                pipe.suite,
                pipe.server,
                &channel,
                method,
                &params,
                Origin::PIPE,
                version_label(&session.init.version, crate::compat::LEGACY_VERSIONS),
            );
            let result = answer_here(pipe, session, route, &params, &channel)
                .instrument(op.span().clone())
                .await;
            let empty = Map::new();
            let outcome = compat::answered_outcome(&result);
            let span = op.span().clone();
            op.finish(pipe.server, result.as_ref().map(|()| &empty), outcome);
            span.in_scope(|| tracing::debug!("request answered"));
            pipe.server
                .record_request(method_label(method), outcome, None);
            match result {
                Ok(()) => reply(pipe, &id, Map::new()).await,
                Err(error) => reply_error(pipe, Some(&id), method, &error).await,
            }
        }
        LegacyRoute::Unary => {
            pipe.suite.route(method, &channel)?;
            if pipe.in_flight.len() >= pipe.config.max_in_flight {
                // A limit of the server, not a fault of the request: `error`,
                // as a 2026 request past it.
                return Err(NotRun {
                    error: McpError::internal("Too many requests in flight"),
                    outcome: RequestOutcome::Error,
                });
            }
            spawn(
                pipe,
                session,
                method.to_owned(),
                params,
                channel,
                pipe.in_flight,
            );
        }
        LegacyRoute::NotRouted => return Err(McpError::MethodNotFound(method.to_owned()).into()),
    }
    Ok(())
}

/// `ping`, `logging/setLevel`, `resources/subscribe` / `unsubscribe`: the
/// session's own state.
async fn answer_here<H: SubscriptionHandler>(
    pipe: &Pipe<'_, H>,
    session: &mut Session,
    route: LegacyRoute,
    params: &Map<String, Value>,
    channel: &Channel,
) -> Result<(), McpError> {
    match route {
        LegacyRoute::SetLevel => {
            session.state.log_level = Some(compat::set_level(pipe.suite, params, channel)?);
        }
        LegacyRoute::Subscription(subscribe) => {
            let uri = compat::subscription_uri(pipe.suite, params, channel, subscribe)?;
            let max = pipe.server.limits().max_resource_uris;
            if session.state.change_uri(uri, subscribe, max)? {
                // The new filter is in place before the reply: no update for an
                // unsubscribed URI follows the `unsubscribe` response. One URI
                // in place when the handler takes it, else a new stream.
                match session.stream.change(uri, subscribe).await {
                    Ok(UriOutcome::Applied) => {}
                    Ok(UriOutcome::Restart) => open_stream(pipe, session).await,
                    Err(error) => {
                        // Refused: the session's set stays what the stream serves.
                        let _ = session.state.change_uri(uri, !subscribe, max);
                        return Err(error);
                    }
                }
            }
        }
        _ => {}
    }
    Ok(())
}

/// Runs a unary request as a task (its MRTR rounds asked of the client on the
/// pipe), registered in flight so a cancel aborts it.
fn spawn<H: SubscriptionHandler>(
    pipe: &Pipe<'_, H>,
    session: &Session,
    method: String,
    params: Map<String, Value>,
    channel: Channel,
    in_flight: &InFlight,
) {
    let suite = pipe.suite.clone();
    let server = pipe.server.clone();
    let asker = session.asker.clone();
    let outbox = pipe.outbox.clone();
    let timeout = pipe.config.request_timeout;
    let stall = server.limits().stall_timeout;
    let id = channel.id().clone();
    let op = operation(
        &suite,
        &server,
        &channel,
        &method,
        &params,
        Origin::PIPE,
        version_label(&asker.version, crate::compat::LEGACY_VERSIONS),
    );
    let span = op.span().clone();
    let task = actix_rt::spawn(
        async move {
            let started = Instant::now();
            let (outcome, counted) =
                compat::rounds(&suite, &asker, &method, params, &channel, &outbox, timeout).await;
            drop(outbox);
            server.record_request(&method, counted, Some(started.elapsed()));
            op.finish(&server, outcome.as_ref(), counted);
            let id = channel.id().clone();
            let bytes = match outcome {
                Ok(result) => encode_result(&id, &legacy_result(result)),
                Err(error) => encode_legacy_error(Some(&id), &legacy_error(&method, &error)),
            };
            if tokio::time::timeout(stall, channel.respond(bytes))
                .await
                .is_err()
            {
                tracing::debug!("response dropped: the outbox stayed full past the stall timeout");
            }
            tracing::debug!("request answered");
        }
        .instrument(span),
    );
    in_flight.insert(id, task);
}
