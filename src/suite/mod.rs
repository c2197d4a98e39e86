//! The suite: the server's catalog (tools, resources, prompts, completions) plus one
//! subscription handler; it answers `server/discover` and every unary request.
//!
//! Unary requests are plain async functions here, not actors. See `docs/suite.md`
//! for the whole surface: argument validation, typed tools and prompts,
//! `x-mcp-header`, pagination cursors, multi round-trip requests (MRTR) and
//! cache hints.
//!
//! # The house: folders by idea, imports downward only
//!
//! Each folder imports only the folders listed for it (always through
//! `crate::suite::<folder>::…`); nothing imports the suite root, which
//! re-exports the public items (`genmcp::suite::X`). The order bottom-up is
//! `common` < `sealing` < `mrtr`, `tasks`, `schemas` < `tools`, `prompts`,
//! `resources`, `completions` < `catalog` < the root, so the graph has no cycle.
//! (Doc links may point anywhere; they are not imports.)
//!
//! | folder | holds | may import |
//! |---|---|---|
//! | `common/` | [`BoxFuture`], content blocks and results ([`Content`], [`CallToolResult`], [`ResourceContents`], [`ToolOutcome`]), the MRTR round [`InputRequired`], the descriptor [`Builder`] and [`Icon`] | nothing in the suite |
//! | `sealing/` | `seal` (HMAC-sealed cursors and request states), [`secret`] (the key), `spent` (spent request states, [`SpentRecord`]) | `common` |
//! | `mrtr/` | request-state binding and retry parsing, the client-capability gate, readers of answers | `common`, `sealing` |
//! | `tasks/` | the tasks extension ([`TaskSupport`], [`TaskCx`], the supervisor) | `common`, `sealing` |
//! | `schemas/` | compiled input/output schemas ([`ToolError`]), `x-mcp-header`, schemas and arguments from Rust types ([`input_schema`], [`CallError`], [`NoArgs`]) | `common` |
//! | `tools/` | [`Tool`], [`ToolCall`], [`ToolDescriptor`], [`ToolBuilder`] | `common`, `mrtr`, `tasks`, `schemas`, `apps` |
//! | `prompts/` | [`Prompt`], [`PromptBuilder`], [`prompt_arguments`], what a prompt returns ([`GetPromptResult`]) | `common`, `mrtr`, `schemas` |
//! | `resources/` | [`ResourceProvider`], [`ResourceSet`], [`ReadOutcome`], URI templates ([`ResourceTemplate`]) | `common`, `mrtr` |
//! | `completions/` | [`Completer`] and `completion/complete` parsing | `common` |
//! | `catalog/` | [`Catalog`] (insertion-ordered), its events and [`CatalogSubscriptions`] | `tools`, `prompts`, `resources`, `completions`, `schemas` |
//! | `apps/` | MCP Apps: [`apps::ToolUi`] (a tool's view), [`apps::UiResource`] / [`apps::UiResources`] (`ui://` views) | `common`, `resources` |
//! | `skills/` | the skills extension (feature `skills`): `Skills`, `Skill`, the `skill://` provider | `common`, `resources`, `catalog` |
//! | root | [`Suite`]: `builder` (settings), `dispatch` (capabilities, routing, discover), `paging`, `tools_call`, `skills_call`, `requests` (prompts, resources, completion), unit `tests` | everything above |

pub mod apps;
mod builder;
mod catalog;
mod common;
mod completions;
mod dispatch;
mod mrtr;
mod paging;
mod prompts;
mod requests;
mod resources;
mod schemas;
pub(crate) mod sealing;
#[cfg(feature = "skills")]
#[cfg_attr(docsrs, doc(cfg(feature = "skills")))]
pub mod skills;
mod skills_call;
pub mod tasks;
mod tools;
mod tools_call;

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Map, Value, json};

pub use builder::SuiteBuilder;
pub use catalog::{
    Catalog, CatalogEvent, CatalogMessage, CatalogStreamState, CatalogSubscriptions, WeakCatalog,
    topics,
};
pub use common::{
    BoxFuture, Builder, CallToolResult, Content, Icon, InputRequired, ResourceContents, ToolOutcome,
};
pub use completions::{
    Completer, Completion, CompletionRef, CompletionRequest, Completions, FnCompleter, MAX_VALUES,
    completer_fn,
};
pub use prompts::{
    FnPrompt, GetPromptResult, Prompt, PromptArgument, PromptBuilder, PromptDescriptor, PromptGet,
    PromptMessage, PromptOutcome, PromptParts, Role, prompt_arguments,
};
pub use resources::{
    ReadOutcome, ReadResult, Resource, ResourceProvider, ResourceRead, ResourceSet,
    ResourceTemplate,
};
pub use schemas::{CallError, MAX_REPORTED_ERRORS, NoArgs, ToolError, input_schema, output_schema};
#[cfg(feature = "redis")]
#[cfg_attr(docsrs, doc(cfg(feature = "redis")))]
pub use sealing::fleet_keys::{
    DEFAULT_FLEET_KEYS_EVERY, FleetKeys, MAX_FLEET_ENTRY_BYTES, MAX_FLEET_NODES,
};
pub use sealing::keys::{KeySet, KeySetError, MAX_KEY_FILE_BYTES, MAX_KEYS, key_id};
pub use sealing::seal::SealingKeys;
pub use sealing::secret;
#[cfg(feature = "redis")]
#[cfg_attr(docsrs, doc(cfg(feature = "redis")))]
pub use sealing::shared_spent;
pub use sealing::spent::{
    DEFAULT_MAX_SPENT_REQUEST_STATES, Spend, SpentError, SpentRecord, SpentRefusals,
};
#[cfg(feature = "skills")]
#[cfg_attr(docsrs, doc(cfg(feature = "skills")))]
pub use skills::{Skill, SkillError, Skills};
pub use tasks::{TaskConfig, TaskCx, TaskStatus, TaskSupport};
pub use tools::{FnTool, Tool, ToolBuilder, ToolCall, ToolDescriptor, ToolParts};

use crate::mux::{Channel, Principal};
use crate::protocol::{
    CacheHint, CacheScope, Implementation, McpError, SUPPORTED_VERSIONS, ServerCapabilities, keys,
    methods,
};
use crate::subscription::{NoSubscriptions, SubscriptionHandler};
use mrtr::{Binding, Retry};
use sealing::seal::{self, Sealer, purpose};
use sealing::spent::{Spender, SpentStates, Store};

/// Default page size of the four list methods.
pub const DEFAULT_PAGE_SIZE: usize = 500;
/// Default lifetime of a pagination cursor.
pub const DEFAULT_CURSOR_TTL: Duration = Duration::from_secs(60 * 60);
/// Default lifetime of an MRTR `requestState`.
pub const DEFAULT_REQUEST_STATE_TTL: Duration = Duration::from_secs(10 * 60);

struct Inner {
    info: Implementation,
    /// What every result's `_meta` gets, made once: `{serverInfo: info}`.
    stamp: Map<String, Value>,
    instructions: Option<String>,
    discover_cache: CacheHint,
    list_cache: CacheHint,
    tools_cache: Option<CacheHint>,
    prompts_cache: Option<CacheHint>,
    resources_cache: Option<CacheHint>,
    read_cache: CacheHint,
    page_size: usize,
    cursor_ttl: Duration,
    request_state_ttl: Duration,
    sealer: Sealer,
    spent: Spender,
    logging: bool,
    catalog: Catalog,
    tasks: tasks::Tasks,
    #[cfg(feature = "skills")]
    skills: Option<skills::Skills>,
    /// MCP Apps views are served (`extensions["io.modelcontextprotocol/ui"]`).
    apps: bool,
}

/// A catalog plus one subscription handler `H`. Cheap to clone.
///
/// ```
/// use genmcp::prelude::*;
/// let catalog = Catalog::new();
/// catalog.add_tool(ToolBuilder::new("hello").description("Says hello")
///     .handler(|_call| async { Ok(CallToolResult::text("hello").into()) }));
/// let suite = Suite::builder(Implementation::new("demo", "1.0.0"))
///     .catalog(catalog.clone())
///     .subscriptions(CatalogSubscriptions::new(&catalog))
///     .build();
/// assert_eq!(suite.info().name, "demo");
/// ```
pub struct Suite<H = NoSubscriptions> {
    inner: Arc<Inner>,
    handler: Arc<H>,
}

impl<H> Clone for Suite<H> {
    fn clone(&self) -> Self {
        Suite {
            inner: self.inner.clone(),
            handler: self.handler.clone(),
        }
    }
}

/// An `Mcp-Param-*` header a request must carry: a tool argument annotated with
/// `x-mcp-header` in the tool's input schema, and the argument's value.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct ParamHeader {
    /// The header name, e.g. `Mcp-Param-Region`.
    pub header: String,
    /// The argument value from the body (string, integer or boolean).
    pub value: Value,
}

/// How the transport must route a method.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Route {
    /// A unary request: [`Suite::call`].
    Unary,
    /// `subscriptions/listen`: the runtime opens a stream.
    Listen,
}

fn invalid_cursor() -> McpError {
    McpError::invalid_params("Invalid cursor")
}

fn not_found(uri: &str) -> McpError {
    McpError::invalid_params_with("Resource not found", json!({ "uri": uri }))
}

/// The result of a retried MRTR request is never cacheable.
const NO_CACHE: CacheHint = CacheHint {
    ttl_ms: 0,
    scope: CacheScope::Private,
};

impl<H> Suite<H> {
    /// The key that seals cursors and request states (also the 2025-era
    /// session ids of the HTTP transport's compatibility path).
    pub(crate) fn sealer(&self) -> &Sealer {
        &self.inner.sealer
    }

    /// The live key set sealing this suite's cursors, request states and
    /// 2025 session ids (replace it to rotate keys without a restart).
    pub fn sealing_keys(&self) -> SealingKeys {
        self.inner.sealer.keys().clone()
    }

    /// Spent MRTR request states remembered now in this process, and the most
    /// that can be ([`SuiteBuilder::max_spent_request_states`]); `(0, 0)` with
    /// a [`SuiteBuilder::spent_record`], which keeps its own.
    pub fn spent_request_states(&self) -> (usize, usize) {
        self.inner.spent.stats()
    }

    /// The retries whose `requestState` this suite refused, by reason (what
    /// `genmcp_spent_refusals_total` exports; it keeps counting).
    pub fn spent_refusals(&self) -> Arc<SpentRefusals> {
        self.inner.spent.refusals()
    }

    /// The Redis side shared with the other nodes of its bus
    /// ([`SuiteBuilder::shared_tasks`]): the bus, its keys and this node's
    /// name and lease; `None` on one node.
    pub(crate) fn shared_node(&self) -> Option<tasks::SharedTasks> {
        self.inner.tasks.remote_handle()
    }

    /// Takes (once) and keeps renewing this node's lease
    /// (`<prefix>task-node:<node>`), as the first shared task does: what
    /// other nodes check before trusting something this node holds. A
    /// no-op on one node; fails (closed) when Redis cannot be asked.
    #[cfg(feature = "redis")]
    pub(crate) async fn hold_node_lease(&self) -> Result<(), crate::protocol::McpError> {
        self.inner.tasks.hold_lease().await
    }
}

#[cfg(test)]
mod tests;
