//! The suite: the server's catalog (tools, resources, prompts, completions) plus one
//! subscription handler; it answers `server/discover` and every unary request.
//!
//! Unary requests are plain async functions here, not actors. See `docs/suite.md`
//! for the whole surface: argument validation, typed tools and prompts,
//! `x-mcp-header`, pagination cursors, multi round-trip requests (MRTR) and
//! cache hints.
//!
//! Files, by idea: `builder` (settings), `dispatch` (capabilities, routing,
//! discover), `paging`, `tools_call`, `requests` (prompts, resources,
//! completion); the catalog (`catalog`, `ordered`, `events`); the items
//! (`describe` for what tools and prompts share, `tool`, `prompt`,
//! `prompt_result`, `resource`, `completion`, `content`, `input_required`);
//! schemas (`schema`, `headers`, `typed`); MRTR and tokens (`mrtr`,
//! `mrtr_gate`, `mrtr_answers`, `seal`).

mod builder;
mod catalog;
mod completion;
mod content;
mod describe;
mod dispatch;
mod events;
mod headers;
mod input_required;
mod mrtr;
mod mrtr_answers;
mod mrtr_gate;
mod ordered;
mod paging;
mod prompt;
mod prompt_result;
mod requests;
mod resource;
mod schema;
pub(crate) mod seal;
pub mod secret;
mod spent;
pub mod tasks;
mod template;
mod tool;
mod tools_call;
mod typed;

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Map, Value, json};

pub use builder::SuiteBuilder;
pub use catalog::{Catalog, WeakCatalog};
pub use completion::{
    Completer, Completion, CompletionRef, CompletionRequest, Completions, FnCompleter, MAX_VALUES,
    completer_fn,
};
pub use content::{CallToolResult, Content, ResourceContents};
pub use describe::{Builder, Icon};
pub use events::{CatalogEvent, CatalogStreamState, CatalogSubscriptions, topics};
pub use prompt::{
    FnPrompt, GetPromptResult, Prompt, PromptArgument, PromptBuilder, PromptDescriptor, PromptGet,
    PromptMessage, PromptOutcome, PromptParts, Role,
};
pub use resource::{
    ReadOutcome, ReadResult, Resource, ResourceProvider, ResourceRead, ResourceSet,
    ResourceTemplate,
};
pub use schema::{MAX_REPORTED_ERRORS, ToolError};
pub use tasks::{TaskConfig, TaskCx, TaskStatus, TaskSupport};
pub use tool::{
    BoxFuture, FnTool, InputRequired, Tool, ToolBuilder, ToolCall, ToolDescriptor, ToolOutcome,
    ToolParts,
};
pub use typed::{CallError, NoArgs, input_schema, output_schema, prompt_arguments};

use crate::mux::{Channel, Principal};
use crate::protocol::{
    CacheHint, CacheScope, Implementation, McpError, SUPPORTED_VERSIONS, ServerCapabilities, keys,
    methods,
};
use crate::subscription::{NoSubscriptions, SubscriptionHandler};
use mrtr::{Binding, Retry};
use seal::{Sealer, purpose};
pub use spent::{DEFAULT_MAX_SPENT_REQUEST_STATES, Spend, SpentError, SpentRecord, SpentRefusals};
use spent::{Spender, SpentStates, Store};

/// Default page size of the four list methods.
pub const DEFAULT_PAGE_SIZE: usize = 500;
/// Default lifetime of a pagination cursor.
pub const DEFAULT_CURSOR_TTL: Duration = Duration::from_secs(60 * 60);
/// Default lifetime of an MRTR `requestState`.
pub const DEFAULT_REQUEST_STATE_TTL: Duration = Duration::from_secs(10 * 60);

struct Inner {
    info: Implementation,
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
}

#[cfg(test)]
mod tests;
