//! What every transport does once a request's envelope and `_meta` are valid:
//! route it (unary or listen), and run unary requests as local tasks.

use std::panic::AssertUnwindSafe;

use futures_util::FutureExt as _;
use serde_json::{Map, Value};
use tokio::sync::oneshot;

use crate::mux::{Assigns, Channel, Outbox};
use crate::protocol::jsonrpc::{encode_error, encode_result};
use crate::protocol::{McpError, Phase, RequestId, RequestMeta, SubscriptionFilter};
use crate::runtime::{Server, listen_filter};
use crate::subscription::SubscriptionHandler;
use crate::suite::{Route, Suite};

/// A routed request.
pub(crate) enum Routed {
    /// Answer with [`spawn_unary`].
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

/// Runs a unary request on the current arbiter. Its final frame (result or
/// error) goes into the channel's outbox after any notification it sent; a
/// panicking handler answers `-32603`. Also returns the HTTP status of the outcome.
pub(crate) fn spawn_unary<H: SubscriptionHandler>(
    suite: &Suite<H>,
    method: String,
    params: Map<String, Value>,
    channel: Channel,
) -> (tokio::task::JoinHandle<()>, oneshot::Receiver<u16>) {
    let (status_tx, status_rx) = oneshot::channel::<u16>();
    let future = suite.call(&method, params, channel.clone());
    let task = actix_rt::spawn(async move {
        let result = AssertUnwindSafe(future)
            .catch_unwind()
            .await
            .unwrap_or_else(|_| {
                tracing::error!(method = %method, "request handler panicked");
                Err(McpError::internal("Internal error: request handler failed"))
            });
        let id = channel.id();
        let (bytes, status) = match result {
            Ok(result) => (encode_result(id, &result), 200),
            Err(error) => (
                encode_error(Some(id), &error),
                error.http_status(Phase::Dispatch),
            ),
        };
        let _ = status_tx.send(status);
        let _ = channel.respond(bytes).await;
    });
    (task, status_rx)
}
