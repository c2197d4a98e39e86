//! What every transport does once a request's envelope and `_meta` are valid:
//! route it (unary or listen), and run unary requests as local tasks.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::pin::Pin;
use std::task::Poll;
use std::time::{Duration, Instant};

use futures_util::FutureExt as _;
use serde_json::{Map, Value};
use tokio::sync::oneshot;
use tracing::Instrument as _;

use crate::mux::{Assigns, Channel, Outbox};
use crate::protocol::jsonrpc::{encode_error, encode_result};
use crate::protocol::trace_context::TraceContext;
use crate::protocol::{McpError, Phase, RequestId, RequestMeta, SubscriptionFilter};
use crate::runtime::{
    NetworkTransport, Operation, OperationStart, RequestOutcome, Server, listen_filter,
    method_label, version_label,
};
use crate::subscription::SubscriptionHandler;
use crate::suite::{Route, Suite};

/// A routed request.
pub(crate) enum Routed {
    /// Answer with [`unary_future`].
    Unary {
        method: String,
        params: Map<String, Value>,
        channel: Channel,
    },
    /// Open a stream with [`crate::runtime::spawn_listen`].
    Listen(Box<ListenRequest>),
}

/// A validated `subscriptions/listen`.
pub(crate) struct ListenRequest {
    pub(crate) meta: RequestMeta,
    pub(crate) assigns: Assigns,
    pub(crate) filter: SubscriptionFilter,
}

/// Validates a request's `_meta` and protocol version (`-32602`, `-32022`). A
/// legacy `initialize` without a modern `_meta` version (a 2025-era client) gets
/// `-32022` naming the served versions, so the client can tell it reached a
/// modern-only server instead of reading a bare "missing _meta".
pub(crate) fn validate_meta(
    method: &str,
    params: Option<&Map<String, Value>>,
) -> Result<RequestMeta, McpError> {
    if method == "initialize" && RequestMeta::raw_version(params).is_none() {
        let requested = params
            .and_then(|p| p.get("protocolVersion"))
            .and_then(Value::as_str)
            .unwrap_or("unknown");
        return Err(McpError::unsupported_version(requested));
    }
    let meta = RequestMeta::from_params(params)?;
    meta.check_version()?;
    Ok(meta)
}

/// Routes a request whose `_meta` is valid: `-32601` for unknown or unadvertised
/// methods, `-32602`/`-32021` for a bad listen filter. Frames of a unary request
/// go to `outbox`.
#[allow(clippy::too_many_arguments)]
pub(crate) fn route<H: SubscriptionHandler>(
    suite: &Suite<H>,
    server: &Server,
    id: RequestId,
    method: String,
    params: Map<String, Value>,
    meta: RequestMeta,
    assigns: Assigns,
    outbox: Outbox,
) -> Result<Routed, McpError> {
    let channel = Channel::for_request(id, meta, assigns, outbox);
    match suite.route(&method, &channel)? {
        Route::Listen => {
            let filter = listen_filter(&params, channel.meta(), server.limits())?;
            Ok(Routed::Listen(Box::new(ListenRequest {
                meta: channel.meta().clone(),
                assigns: channel.assigns().clone(),
                filter,
            })))
        }
        _ => Ok(Routed::Unary {
            method,
            params,
            channel,
        }),
    }
}

/// The deadlines of one unary request.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Deadlines {
    /// How long the handler may run before it is dropped and the client gets
    /// `-32603` "Request timed out".
    pub(crate) request: Duration,
    /// How long the final frame may wait for outbox room (`Limits::stall_timeout`)
    /// before it is given up (the client is not reading).
    pub(crate) stall: Duration,
}

pub(crate) use crate::runtime::TIMED_OUT;

/// Where a request came from, for its span and metrics: the transport and,
/// over HTTP, the `traceparent`/`tracestate` headers (used when the request's
/// `_meta` carries no trace context).
#[derive(Clone, Debug)]
pub(crate) struct Origin {
    pub(crate) transport: NetworkTransport,
    pub(crate) header_trace: Option<TraceContext>,
}

impl Origin {
    /// stdio: a pipe, no headers.
    pub(crate) const PIPE: Origin = Origin {
        transport: NetworkTransport::Pipe,
        header_trace: None,
    };
}

/// The [`Operation`] of one request: its span, by the OpenTelemetry MCP
/// conventions and carrying the method, id and principal the logs show (the
/// outcome is recorded when it ends), and its duration metric. `version` is
/// the bounded protocol version label ([`version_label`]).
///
/// At DEBUG, as tower-http's request spans are: at INFO and above it is not
/// created at all, because a formatting subscriber renders a span's fields
/// when it is made, and that was about 5 % of the CPU of a trivial
/// `tools/call` (docs/benchmark.md). The warnings and errors of a request
/// carry its method and id themselves, so they say which request at any level.
pub(crate) fn operation<H: SubscriptionHandler>(
    suite: &Suite<H>,
    server: &Server,
    channel: &Channel,
    method: &str,
    params: &Map<String, Value>,
    origin: Origin,
    version: &'static str,
) -> Operation {
    let target_known = params
        .get("name")
        .and_then(Value::as_str)
        .is_some_and(|name| target_known(suite, method, name));
    Operation::start(
        server,
        channel,
        OperationStart {
            method,
            params,
            transport: origin.transport,
            version,
            target_known,
            header_trace: origin.header_trace,
        },
    )
}

/// Whether `suite`'s catalog defines `name` as the target of `method`: a
/// tool for `tools/call`, a prompt for `prompts/get` (false for any other
/// method). Only such a name goes in a span name or a metric label.
pub(crate) fn target_known<H: SubscriptionHandler>(
    suite: &Suite<H>,
    method: &str,
    name: &str,
) -> bool {
    match method {
        crate::protocol::methods::TOOLS_CALL => suite.catalog().tool(name).is_some(),
        crate::protocol::methods::PROMPTS_GET => suite.catalog().prompt(name).is_some(),
        _ => false,
    }
}

/// The protocol version label of a 2026-07-28 request.
pub(crate) fn modern_version(channel: &Channel) -> &'static str {
    version_label(&channel.meta().protocol_version, &[])
}

/// The HTTP status of a unary outcome, and for a limit hit inside the handler
/// (a 429) the seconds to put in `Retry-After`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ReplyStatus {
    /// The HTTP status code.
    pub(crate) code: u16,
    /// `Retry-After` seconds, from [`McpError::retry_after`].
    pub(crate) retry_after: Option<u64>,
}

impl ReplyStatus {
    /// 200, nothing to retry.
    pub(crate) const OK: Self = Self {
        code: 200,
        retry_after: None,
    };
}

/// One unary request as a future for the current arbiter, to poll in place
/// or spawn (`actix_rt::spawn`). Its final frame (result or error) goes into
/// the channel's outbox after any notification it sent; a panicking handler
/// answers `-32603`, and so does one still running at `deadlines.request`
/// (its future is dropped). `guard` is held until the request has been
/// answered (an in-flight permit). Also returns the HTTP status of the
/// outcome ([`ReplyStatus`]). The request is counted in `server`'s request
/// metrics (method, outcome, duration) and runs in its [`operation`]'s span.
///
/// Polled in place first ([`run_or_spawn`], as HTTP does), its first poll runs in
/// the caller's task and any later one in a task of its own: a handler must
/// register its waker on every poll, as the `Future` contract asks (tokio's
/// timers, channels and locks do), and must not rely on task-locals or
/// `tokio::task::id()` staying the same across polls.
#[allow(clippy::too_many_arguments)]
pub(crate) fn unary_future<H: SubscriptionHandler, G: 'static>(
    suite: &Suite<H>,
    server: &Server,
    method: String,
    params: Map<String, Value>,
    channel: Channel,
    deadlines: Deadlines,
    guard: G,
    origin: Origin,
) -> (
    impl Future<Output = ()> + 'static,
    oneshot::Receiver<ReplyStatus>,
) {
    let (status_tx, status_rx) = oneshot::channel::<ReplyStatus>();
    let op = operation(
        suite,
        server,
        &channel,
        &method,
        &params,
        origin,
        modern_version(&channel),
    );
    let span = op.span().clone();
    let future = suite.call(&method, params, channel.clone());
    let server = server.clone();
    let future = async move {
        let _guard = guard;
        let started = Instant::now();
        let outcome =
            tokio::time::timeout(deadlines.request, AssertUnwindSafe(future).catch_unwind()).await;
        let (result, counted) = match outcome {
            Ok(Ok(result)) => {
                let counted = RequestOutcome::answered(&result);
                (result, counted)
            }
            Ok(Err(_)) => {
                tracing::error!(
                    method = method_label(&method),
                    request_id = %channel.id(),
                    "request handler panicked"
                );
                (
                    Err(McpError::internal("Internal error: request handler failed")),
                    RequestOutcome::Panicked,
                )
            }
            Err(_) => {
                tracing::warn!(
                    method = method_label(&method),
                    request_id = %channel.id(),
                    deadline = ?deadlines.request,
                    "request timed out; handler dropped"
                );
                (Err(McpError::internal(TIMED_OUT)), RequestOutcome::Timeout)
            }
        };
        server.record_request(&method, counted, Some(started.elapsed()));
        op.finish(&server, result.as_ref(), counted);
        let id = channel.id();
        let (bytes, status) = match result {
            Ok(result) => (encode_result(id, &result), ReplyStatus::OK),
            Err(error) => (
                encode_error(Some(id), &error),
                ReplyStatus {
                    code: error.http_status(Phase::Dispatch),
                    retry_after: error.retry_after(),
                },
            ),
        };
        let _ = status_tx.send(status);
        if tokio::time::timeout(deadlines.stall, channel.respond(bytes))
            .await
            .is_err()
        {
            tracing::debug!("response dropped: the outbox stayed full past the stall timeout");
        }
        tracing::debug!("request answered");
    };
    (future.instrument(span), status_rx)
}

/// Polls a unary request ([`unary_future`]) once in the caller's task and
/// spawns it only if it is not done: a handler that answers at once costs no
/// task and no wake-up. Returns the task when there is one. A panic
/// outside the handler's own guard drops the request (its outbox closes, so
/// the caller answers "no response"), as a panicking task would.
pub(crate) async fn run_or_spawn(
    mut future: Pin<Box<dyn Future<Output = ()>>>,
) -> Option<tokio::task::JoinHandle<()>> {
    let first = std::future::poll_fn(|cx| {
        Poll::Ready(catch_unwind(AssertUnwindSafe(|| future.as_mut().poll(cx))))
    })
    .await;
    match first {
        Ok(Poll::Pending) => Some(actix_rt::spawn(future)),
        Ok(Poll::Ready(())) | Err(_) => None,
    }
}
