//! The wire protocol of MCP revision 2026-07-28, free of any runtime.
//!
//! Everything here is plain data: JSON-RPC framing ([`jsonrpc`]), the per-request
//! `_meta` envelope and its validation ([`meta`]), the 2026-07-28 types this crate
//! speaks ([`types`]) and the one error enum that knows its JSON-RPC code and its
//! HTTP status ([`error`]). No actix, no tokio, no I/O: this module could become a
//! crate of its own without edits.

mod decode;
pub mod error;
pub mod jsonrpc;
pub mod meta;
pub mod trace_context;
pub mod types;

pub use error::{McpError, Phase};
pub use jsonrpc::{Incoming, Notification, Request, RequestId};
pub use meta::{ClientCapabilities, Implementation, LogLevel, ProgressToken, RequestMeta};
pub use types::{
    CacheHint, CacheScope, ServerCapabilities, SubscriptionCapabilities, SubscriptionFilter,
};

/// The protocol revision this crate implements.
pub const PROTOCOL_VERSION: &str = "2026-07-28";

/// Every protocol version this server serves. The single source for both
/// `server/discover.supportedVersions` and `-32022`'s `data.supported`.
pub const SUPPORTED_VERSIONS: &[&str] = &[PROTOCOL_VERSION];

/// Method names the server handles or emits.
pub mod methods {
    /// `server/discover`.
    pub const DISCOVER: &str = "server/discover";
    /// `subscriptions/listen`.
    pub const LISTEN: &str = "subscriptions/listen";
    /// `tools/list`.
    pub const TOOLS_LIST: &str = "tools/list";
    /// `tools/call`.
    pub const TOOLS_CALL: &str = "tools/call";
    /// `resources/list`.
    pub const RESOURCES_LIST: &str = "resources/list";
    /// `resources/templates/list`.
    pub const RESOURCES_TEMPLATES_LIST: &str = "resources/templates/list";
    /// `resources/read`.
    pub const RESOURCES_READ: &str = "resources/read";
    /// `prompts/list`.
    pub const PROMPTS_LIST: &str = "prompts/list";
    /// `prompts/get`.
    pub const PROMPTS_GET: &str = "prompts/get";
    /// `completion/complete`.
    pub const COMPLETE: &str = "completion/complete";

    /// `notifications/subscriptions/acknowledged`.
    pub const ACKNOWLEDGED: &str = "notifications/subscriptions/acknowledged";
    /// `notifications/tools/list_changed`.
    pub const TOOLS_LIST_CHANGED: &str = "notifications/tools/list_changed";
    /// `notifications/prompts/list_changed`.
    pub const PROMPTS_LIST_CHANGED: &str = "notifications/prompts/list_changed";
    /// `notifications/resources/list_changed`.
    pub const RESOURCES_LIST_CHANGED: &str = "notifications/resources/list_changed";
    /// `notifications/resources/updated`.
    pub const RESOURCES_UPDATED: &str = "notifications/resources/updated";
    /// `notifications/progress`.
    pub const PROGRESS: &str = "notifications/progress";
    /// `notifications/message`.
    pub const LOG_MESSAGE: &str = "notifications/message";
    /// `notifications/cancelled`.
    pub const CANCELLED: &str = "notifications/cancelled";
    /// `notifications/tasks`: a task's status on a listen stream (the tasks
    /// extension); sent by the runtime for the stream's honoured `taskIds`.
    pub const TASK_STATUS: &str = "notifications/tasks";

    /// Methods removed by 2026-07-28: always `-32601` (HTTP 404).
    pub const REMOVED: &[&str] = &[
        "initialize",
        "notifications/initialized",
        "ping",
        "logging/setLevel",
        "resources/subscribe",
        "resources/unsubscribe",
        "notifications/roots/list_changed",
    ];

    /// The five notification methods that belong to a `subscriptions/listen` stream
    /// and carry `_meta["io.modelcontextprotocol/subscriptionId"]`.
    pub const SUBSCRIPTION: &[&str] = &[
        ACKNOWLEDGED,
        TOOLS_LIST_CHANGED,
        PROMPTS_LIST_CHANGED,
        RESOURCES_LIST_CHANGED,
        RESOURCES_UPDATED,
    ];

    /// Whether `method` is one of the five subscription notification methods.
    pub fn is_subscription(method: &str) -> bool {
        SUBSCRIPTION.contains(&method)
    }
}

/// The reserved `_meta` keys.
pub mod keys {
    /// Request `_meta`: the protocol version (required).
    pub const PROTOCOL_VERSION: &str = "io.modelcontextprotocol/protocolVersion";
    /// Request `_meta`: the client capabilities (required).
    pub const CLIENT_CAPABILITIES: &str = "io.modelcontextprotocol/clientCapabilities";
    /// Request `_meta`: the client implementation (optional).
    pub const CLIENT_INFO: &str = "io.modelcontextprotocol/clientInfo";
    /// Request `_meta`: the log level that turns logging on for this request.
    pub const LOG_LEVEL: &str = "io.modelcontextprotocol/logLevel";
    /// Request `_meta`: the progress token.
    pub const PROGRESS_TOKEN: &str = "progressToken";
    /// Result `_meta`: the server implementation.
    pub const SERVER_INFO: &str = "io.modelcontextprotocol/serverInfo";
    /// Listen-stream `_meta`: the listen request id, verbatim.
    pub const SUBSCRIPTION_ID: &str = "io.modelcontextprotocol/subscriptionId";
}
