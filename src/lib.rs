//! # genmcp
//!
//! A runtime for Model Context Protocol servers, revision 2026-07-28, built around
//! long-lived `subscriptions/listen` notification streams. Each stream is an actix
//! actor driven by an application [`subscription::SubscriptionHandler`]; the streams
//! of one client connection live under a supervisor actor.
//!
//! Layers (each only looks down): [`transport`] → `compat` (the 2025-era
//! layer every transport shares) → [`runtime`] → [`suite`] →
//! [`mux`] → [`protocol`] and [`pubsub`]. See `docs/architecture.md`.
//!
//! ## Features
//!
//! | feature | default | what it adds |
//! |---|---|---|
//! | `schema-validation` | on | tool arguments and `structuredContent` checked against the tools' JSON Schemas (crate `jsonschema`); without it schemas are generated and served but nothing is checked against them |
//! | `redis` | off | the Redis bus (`pubsub::redis`, `Bus::redis`) and what the nodes of one bus share: tasks (`SuiteBuilder::shared_tasks`), 2025 sessions, spent request states (`suite::shared_spent`); without it the bus is embedded and all state lives in one process |
//! | `jwt` | off | [`http::auth`]'s `JwtAuthenticator` and `AuthConfig::jwt`: JWT access tokens checked against a JWKS file |
//! | `skills` | off | the skills extension (SEP-2640): `suite::Skills` from a directory or from code, `skills/list`, `skills/get`, `resources/directory/read`, `skill://` resources (crate `saphyr` for the front matter) |
//! | `otel` | off | the `otel` module: OTLP/HTTP export of the request and stream spans (OpenTelemetry MCP conventions, parented on the caller's `traceparent`) and of the convention histograms |
//! | `loom` | off | the loom models of the queue; tests only |
//!
//! `default-features = false` gives the fewest crates (the 2026 HTTP path
//! and stdio need none of these); `docs/dependencies.md` says what each
//! costs in crates.
#![forbid(unsafe_code)]
#![cfg_attr(docsrs, feature(doc_cfg))]
// Protocol errors carry structured JSON data and travel on cold paths (a refused
// request); boxing every one of them would cost more than it saves.
#![allow(clippy::result_large_err)]

pub(crate) mod compat;
pub mod mux;
#[cfg(feature = "otel")]
#[cfg_attr(docsrs, doc(cfg(feature = "otel")))]
pub mod otel;
pub mod protocol;
pub mod pubsub;
pub mod queue;
pub mod runtime;
pub mod subscription;
pub mod suite;
pub mod transport;

pub use transport::admin;
pub use transport::http;

/// Everything a handler or server author needs.
pub mod prelude {
    pub use crate::http::{DrainHandle, Endpoint, HttpConfig, ServerThread};
    pub use crate::mux::{Assigns, Channel, ChannelError, Principal};
    pub use crate::protocol::{
        CacheHint, CacheScope, Implementation, LogLevel, McpError, Notification, RequestId,
        SubscriptionCapabilities, SubscriptionFilter,
    };
    pub use crate::pubsub::{Bus, BusSubscription, Inbox, InboxError};
    pub use crate::runtime::{CloseReason, Limits, Subscriber, Subscribers};
    pub use crate::subscription::{
        Flow, NoSubscriptions, StopReason, Subscribe, SubscribeCx, SubscriptionHandler, UriChange,
        UriChanged,
    };
    pub use crate::suite::{
        CallToolResult, Catalog, CatalogEvent, CatalogSubscriptions, Completions, Content,
        GetPromptResult, InputRequired, PromptBuilder, PromptMessage, ReadOutcome, Resource,
        ResourceContents, ResourceSet, ResourceTemplate, Suite, Tool, ToolBuilder, ToolCall,
        ToolError, ToolOutcome, WeakCatalog,
    };
    pub use crate::suite::{TaskConfig, TaskCx, TaskStatus, TaskSupport};
}

/// The README's examples, compiled as doctests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;

/// The examples of the guides in `docs/`, compiled as doctests (those of a
/// feature's guide with that feature).
#[cfg(doctest)]
mod docs_doctests {
    #[doc = include_str!("../docs/apps.md")]
    pub struct Apps;
    #[cfg(feature = "jwt")]
    #[doc = include_str!("../docs/auth.md")]
    pub struct Auth;
    #[doc = include_str!("../docs/http.md")]
    pub struct Http;
    #[cfg(feature = "otel")]
    #[doc = include_str!("../docs/operations.md")]
    pub struct Operations;
    #[cfg(feature = "skills")]
    #[doc = include_str!("../docs/skills.md")]
    pub struct Skills;
    #[doc = include_str!("../docs/subscriptions.md")]
    pub struct Subscriptions;
    #[doc = include_str!("../docs/suite.md")]
    pub struct Suite;
    #[doc = include_str!("../docs/tasks.md")]
    pub struct Tasks;
}
