//! Which 2025 request goes where, and the checks of the ones the
//! compatibility layer answers itself (`ping`, `logging/setLevel`,
//! `resources/subscribe` / `unsubscribe`).

use serde_json::{Map, Value};

use crate::mux::Channel;
use crate::protocol::types::MAX_RESOURCE_URI_LEN;
use crate::protocol::{LogLevel, McpError, methods};
use crate::runtime::RequestOutcome;
use crate::subscription::SubscriptionHandler;
use crate::suite::Suite;

/// Where a 2025 request (after `initialize`) is served.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum LegacyRoute {
    /// `ping`: `{}`.
    Ping,
    /// `logging/setLevel`: the session's level ([`set_level`]).
    SetLevel,
    /// `resources/subscribe` (`true`) or `unsubscribe` (`false`): the
    /// session's URI set ([`subscription_uri`]).
    Subscription(bool),
    /// A unary request of the suite, its MRTR rounds as server-to-client
    /// requests ([`super::rounds`]).
    Unary,
    /// Anything else (`server/discover`, `subscriptions/listen` included):
    /// `-32601`.
    NotRouted,
}

/// How a request this layer answers itself (`ping`, `logging/setLevel`,
/// `resources/subscribe` / `unsubscribe`) is counted, on every transport:
/// `refused` for a method the server does not advertise or invalid params
/// (`-32601`, `-32602`), `limited` for a bound with a retry delay (429),
/// `error` for anything else (the stream's handler refused a URI change,
/// the server is busy, the shared session store failed).
pub(crate) fn answered_outcome(result: &Result<(), McpError>) -> RequestOutcome {
    match result {
        Ok(()) => RequestOutcome::Ok,
        Err(McpError::MethodNotFound(_) | McpError::InvalidParams { .. }) => {
            RequestOutcome::Refused
        }
        answered => RequestOutcome::answered(answered),
    }
}

/// Routes a 2025 method.
pub(crate) fn legacy_route(method: &str) -> LegacyRoute {
    match method {
        "ping" => LegacyRoute::Ping,
        "logging/setLevel" => LegacyRoute::SetLevel,
        "resources/subscribe" => LegacyRoute::Subscription(true),
        "resources/unsubscribe" => LegacyRoute::Subscription(false),
        methods::TOOLS_LIST
        | methods::TOOLS_CALL
        | methods::PROMPTS_LIST
        | methods::PROMPTS_GET
        | methods::RESOURCES_LIST
        | methods::RESOURCES_TEMPLATES_LIST
        | methods::RESOURCES_READ
        | methods::COMPLETE
        // The skills extension (served only when the suite has skills; the
        // suite's routing answers -32601 otherwise).
        | "skills/list"
        | "skills/get"
        | "resources/directory/read" => LegacyRoute::Unary,
        _ => LegacyRoute::NotRouted,
    }
}

/// The level of a `logging/setLevel`: `-32601` when the suite does not
/// advertise `logging`, `-32602` for an unknown level.
pub(crate) fn set_level<H: SubscriptionHandler>(
    suite: &Suite<H>,
    params: &Map<String, Value>,
    channel: &Channel,
) -> Result<LogLevel, McpError> {
    if suite.capabilities(channel).logging.is_none() {
        return Err(McpError::MethodNotFound("logging/setLevel".into()));
    }
    params
        .get("level")
        .and_then(Value::as_str)
        .and_then(LogLevel::parse)
        .ok_or_else(|| {
            McpError::invalid_params(
                "Invalid params: level must be one of debug, info, notice, warning, error, critical, alert, emergency",
            )
        })
}

/// The URI of a `resources/subscribe` / `unsubscribe`: `-32601` when the
/// handler does not advertise resource updates, `-32602` for a missing, empty
/// or too long URI.
pub(crate) fn subscription_uri<'p, H: SubscriptionHandler>(
    suite: &Suite<H>,
    params: &'p Map<String, Value>,
    channel: &Channel,
    subscribe: bool,
) -> Result<&'p str, McpError> {
    let method = if subscribe {
        "resources/subscribe"
    } else {
        "resources/unsubscribe"
    };
    if !suite.subscription_capabilities(channel).resources_updated {
        return Err(McpError::MethodNotFound(method.into()));
    }
    params
        .get("uri")
        .and_then(Value::as_str)
        .filter(|u| !u.is_empty() && u.len() <= MAX_RESOURCE_URI_LEN)
        .ok_or_else(|| {
            McpError::invalid_params(format!(
                "Invalid params: uri must be a non-empty string of at most {MAX_RESOURCE_URI_LEN} bytes"
            ))
        })
}
