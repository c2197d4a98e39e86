//! Opening a `subscriptions/listen` stream under a connection.

use actix::prelude::*;
use serde_json::{Map, Value};

use super::connection::{Connection, OpenStream, StreamSlot};
use super::stream::{OnOpen, SessionStreamControl, StopStream, Stream, StreamSetup};
use super::{Limits, Server};
use crate::mux::{Assigns, Channel, Outbox};
use crate::protocol::jsonrpc::encode_result;
use crate::protocol::{McpError, RequestId, RequestMeta, SubscriptionFilter, keys};
use crate::subscription::SubscriptionHandler;
use crate::suite::Suite;

const TASKS_EXTENSION: &str = "io.modelcontextprotocol/tasks";

/// Validates the params of a listen request: the filter must be well formed
/// (`-32602`), its URIs and its task ids each within
/// [`Limits::max_resource_uris`] (`-32602`), and `taskIds` needs the tasks
/// extension declared (`-32021`). Which task ids are honoured is decided when
/// the stream opens (the caller's own, known tasks).
pub fn listen_filter(
    params: &Map<String, Value>,
    meta: &RequestMeta,
    limits: &Limits,
) -> Result<SubscriptionFilter, McpError> {
    let filter = SubscriptionFilter::from_params(params)?;
    if filter.resource_subscriptions.len() > limits.max_resource_uris {
        return Err(McpError::invalid_params(format!(
            "Invalid params: notifications.resourceSubscriptions lists {} URIs; at most {} are allowed",
            filter.resource_subscriptions.len(),
            limits.max_resource_uris
        )));
    }
    if filter.task_ids.len() > limits.max_resource_uris {
        return Err(McpError::invalid_params(format!(
            "Invalid params: notifications.taskIds lists {} ids; at most {} are allowed",
            filter.task_ids.len(),
            limits.max_resource_uris
        )));
    }
    let asks_tasks = params
        .get("notifications")
        .and_then(Value::as_object)
        .is_some_and(|n| n.get("taskIds").is_some_and(|t| !t.is_null()));
    if asks_tasks && !meta.client_capabilities.declares_extension(TASKS_EXTENSION) {
        let mut ext = Map::new();
        ext.insert(TASKS_EXTENSION.into(), Value::Object(Map::new()));
        let mut required = Map::new();
        required.insert("extensions".into(), Value::Object(ext));
        return Err(McpError::MissingClientCapability {
            message: "taskIds requires the io.modelcontextprotocol/tasks extension".into(),
            required,
        });
    }
    Ok(filter)
}

/// Opens a listen stream for request `id` under `connection`, writing into
/// `outbox`. The stream's first frame is the acknowledgement or, if `subscribe`
/// rejected, the error reply. Errors here (limits, duplicate id) mean no stream
/// was started.
#[allow(clippy::too_many_arguments)]
pub async fn spawn_listen<H: SubscriptionHandler>(
    suite: &Suite<H>,
    server: &Server,
    connection: &Addr<Connection>,
    outbox: Outbox,
    id: RequestId,
    meta: RequestMeta,
    assigns: Assigns,
    filter: SubscriptionFilter,
) -> Result<(), McpError> {
    let channel = Channel::for_listen(
        id.clone(),
        meta,
        assigns,
        outbox,
        server.limits().spill_limit,
    );
    let mut filter = filter;
    let watchable = suite.watchable_task_ids(&filter.task_ids, &channel).await;
    filter.task_ids = watchable.ids();
    let on_open = (!filter.task_ids.is_empty()).then(|| {
        let tasks = suite.task_supervisor();
        Box::new(move |channel: &Channel| tasks.watch_all(&watchable, channel)) as OnOpen
    });
    let mut completion = Map::new();
    completion.insert("resultType".into(), Value::from("complete"));
    suite.stamp_result(&mut completion);
    if let Some(Value::Object(meta)) = completion.get_mut("_meta") {
        meta.insert(keys::SUBSCRIPTION_ID.into(), id.to_value());
    }
    // Encoded now: a few hundred bytes held for the stream's life instead of a
    // JSON tree of small allocations.
    let completion = encode_result(&id, &completion).into();
    open(
        suite, server, connection, channel, id, filter, completion, on_open, false, None,
    )
    .await
    .map(drop)
}

/// Opens the stream of a 2025-era `GET` (the compatibility path of the HTTP
/// transport) under `connection`: the same [`Stream`] actor and handler
/// callbacks as a listen, on a channel that sends no acknowledgement, no
/// subscription ids and no final frame. Returns the stream's controls (to
/// change its URIs, or stop it when its session ends). `replaces`:
/// it replaces the running stream of the same GET (see
/// [`OpenStream::replaces`]). `version`: the session's bounded protocol
/// version label, for its span and `mcp.server.session.duration`.
#[allow(clippy::too_many_arguments)]
pub(crate) async fn spawn_legacy_stream<H: SubscriptionHandler>(
    suite: &Suite<H>,
    server: &Server,
    connection: &Addr<Connection>,
    outbox: Outbox,
    id: RequestId,
    meta: RequestMeta,
    assigns: Assigns,
    filter: SubscriptionFilter,
    replaces: bool,
    version: &'static str,
) -> Result<SessionStreamControl, McpError> {
    let channel = Channel::for_legacy_listen(
        id.clone(),
        meta,
        assigns,
        outbox,
        server.limits().spill_limit,
    );
    open(
        suite,
        server,
        connection,
        channel,
        id,
        filter,
        Box::default(),
        None,
        replaces,
        Some(version),
    )
    .await
    .map(SessionStreamControl::new)
}

/// Starts the stream actor for `channel` under `connection` and returns its
/// address once the connection has registered it.
#[allow(clippy::too_many_arguments)]
async fn open<H: SubscriptionHandler>(
    suite: &Suite<H>,
    server: &Server,
    connection: &Addr<Connection>,
    channel: Channel,
    id: RequestId,
    filter: SubscriptionFilter,
    completion: Box<[u8]>,
    on_open: Option<OnOpen>,
    replaces: bool,
    version: Option<&'static str>,
) -> Result<Addr<Stream<H>>, McpError> {
    let handler = suite.handler();
    let advertised = suite.subscription_capabilities(&channel);
    let setup = StreamSetup {
        channel: channel.clone(),
        requested: filter,
        advertised,
        completion,
        server: server.clone(),
        on_open,
        version,
    };
    let (tx, rx) = tokio::sync::oneshot::channel();
    let spawn = Box::new(move |slot: StreamSlot| -> Recipient<StopStream> {
        let addr = Stream::new(handler, setup, slot).start();
        let stop = addr.clone().recipient();
        let _ = tx.send(addr);
        stop
    });
    connection
        .send(OpenStream {
            id,
            channel,
            spawn,
            replaces,
        })
        .await
        .map_err(|_| McpError::internal("connection closed"))??;
    rx.await
        .map_err(|_| McpError::internal("Internal error: the stream did not start"))
}
