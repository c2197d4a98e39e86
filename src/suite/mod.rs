//! The suite: the server's catalog (tools, resources, prompts, completions) plus one
//! subscription handler; it answers `server/discover` and every unary request.
//!
//! Unary requests are plain async functions here, not actors. See `docs/suite.md`
//! for the whole surface: argument validation, `x-mcp-header`, pagination
//! cursors, multi round-trip requests (MRTR) and cache hints.

mod catalog;
mod completion;
mod content;
mod mrtr;
mod prompt;
mod resource;
mod schema;
mod seal;
mod tool;

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Map, Value, json};

pub use catalog::{Catalog, CatalogEvent, CatalogSubscriptions, WeakCatalog, topics};
pub use completion::{
    Completer, Completion, CompletionRef, CompletionRequest, Completions, FnCompleter, MAX_VALUES,
    completer_fn,
};
pub use content::{CallToolResult, Content, ResourceContents};
pub use prompt::{
    FnPrompt, GetPromptResult, Prompt, PromptArgument, PromptBuilder, PromptDescriptor, PromptGet,
    PromptMessage, PromptOutcome, Role,
};
pub use resource::{
    ReadOutcome, ReadResult, Resource, ResourceProvider, ResourceRead, ResourceSet,
    ResourceTemplate,
};
pub use schema::{MAX_REPORTED_ERRORS, ToolError};
pub use tool::{
    BoxFuture, FnTool, InputRequired, Tool, ToolBuilder, ToolCall, ToolDescriptor, ToolOutcome,
};

use crate::mux::Channel;
use crate::protocol::{
    CacheHint, CacheScope, Implementation, McpError, SUPPORTED_VERSIONS, ServerCapabilities, keys,
    methods,
};
use crate::subscription::{NoSubscriptions, SubscriptionHandler};
use mrtr::{Binding, Retry};
use seal::{Sealer, purpose};

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
    logging: bool,
    catalog: Catalog,
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

/// Builds a [`Suite`].
///
/// Defaults: every cache hint `ttlMs: 0`, `public`; page size
/// [`DEFAULT_PAGE_SIZE`]; cursors live [`DEFAULT_CURSOR_TTL`], request states
/// [`DEFAULT_REQUEST_STATE_TTL`]; a random token key per suite.
pub struct SuiteBuilder<H> {
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
    secret: Option<[u8; 32]>,
    logging: bool,
    catalog: Catalog,
    handler: H,
}

impl Suite<NoSubscriptions> {
    /// Starts a suite for the server `info`.
    pub fn builder(info: Implementation) -> SuiteBuilder<NoSubscriptions> {
        SuiteBuilder {
            info,
            instructions: None,
            discover_cache: CacheHint::default(),
            list_cache: CacheHint::default(),
            tools_cache: None,
            prompts_cache: None,
            resources_cache: None,
            read_cache: CacheHint::default(),
            page_size: DEFAULT_PAGE_SIZE,
            cursor_ttl: DEFAULT_CURSOR_TTL,
            request_state_ttl: DEFAULT_REQUEST_STATE_TTL,
            secret: None,
            logging: false,
            catalog: Catalog::new(),
            handler: NoSubscriptions,
        }
    }
}

impl<H: SubscriptionHandler> SuiteBuilder<H> {
    /// `instructions` for `server/discover`.
    pub fn instructions(mut self, text: impl Into<String>) -> Self {
        self.instructions = Some(text.into());
        self
    }

    /// Cache hint of `server/discover` (default `ttlMs: 0`, `public`).
    pub fn discover_cache(mut self, hint: CacheHint) -> Self {
        self.discover_cache = hint;
        self
    }

    /// Cache hint of the list results not set more precisely (default
    /// `ttlMs: 0`, `public`).
    pub fn list_cache(mut self, hint: CacheHint) -> Self {
        self.list_cache = hint;
        self
    }

    /// Cache hint of `tools/list` (default: [`SuiteBuilder::list_cache`]).
    pub fn tools_cache(mut self, hint: CacheHint) -> Self {
        self.tools_cache = Some(hint);
        self
    }

    /// Cache hint of `prompts/list` (default: [`SuiteBuilder::list_cache`]).
    pub fn prompts_cache(mut self, hint: CacheHint) -> Self {
        self.prompts_cache = Some(hint);
        self
    }

    /// Cache hint of `resources/list` and `resources/templates/list` for
    /// providers without their own hint (default: [`SuiteBuilder::list_cache`]).
    pub fn resources_cache(mut self, hint: CacheHint) -> Self {
        self.resources_cache = Some(hint);
        self
    }

    /// Cache hint of `resources/read` when neither the result nor its provider
    /// sets one (default `ttlMs: 0`, `public`).
    pub fn read_cache(mut self, hint: CacheHint) -> Self {
        self.read_cache = hint;
        self
    }

    /// Items per page of the four list methods (default [`DEFAULT_PAGE_SIZE`];
    /// at least 1).
    pub fn page_size(mut self, size: usize) -> Self {
        self.page_size = size.max(1);
        self
    }

    /// How long a pagination cursor stays valid (default [`DEFAULT_CURSOR_TTL`]).
    pub fn cursor_ttl(mut self, ttl: Duration) -> Self {
        self.cursor_ttl = ttl;
        self
    }

    /// How long an MRTR `requestState` stays valid (default
    /// [`DEFAULT_REQUEST_STATE_TTL`]).
    pub fn request_state_ttl(mut self, ttl: Duration) -> Self {
        self.request_state_ttl = ttl;
        self
    }

    /// Advertises `logging` (deprecated in 2026-07-28, still specified): say so
    /// when tools send `notifications/message` with `Channel::send_log` (which
    /// only ever sends when a request set `io.modelcontextprotocol/logLevel`).
    pub fn logging(mut self) -> Self {
        self.logging = true;
        self
    }

    /// The key that signs cursors and request states (default: 32 random bytes
    /// per suite). Give every replica of a multi-node deployment the same key.
    pub fn secret(mut self, key: [u8; 32]) -> Self {
        self.secret = Some(key);
        self
    }

    /// Uses `catalog` (shared: changes made through any clone are served). Call
    /// it before adding items through the builder.
    pub fn catalog(mut self, catalog: Catalog) -> Self {
        self.catalog = catalog;
        self
    }

    /// Adds a tool to the catalog (see [`Catalog::add_tool`]).
    pub fn tool(self, tool: impl Tool) -> Self {
        self.catalog.add_tool(tool);
        self
    }

    /// Adds a tool, refusing one whose schema is invalid (see [`Catalog::try_add_tool`]).
    pub fn try_tool(self, tool: impl Tool) -> Result<Self, ToolError> {
        self.catalog.try_add_tool(tool)?;
        Ok(self)
    }

    /// Adds a prompt to the catalog.
    pub fn prompt(self, prompt: impl Prompt) -> Self {
        self.catalog.add_prompt(prompt);
        self
    }

    /// Adds a resource provider to the catalog.
    pub fn resources(self, provider: impl ResourceProvider) -> Self {
        self.catalog.add_resources(provider);
        self
    }

    /// Sets the catalog's completer.
    pub fn completer(self, completer: impl Completer) -> Self {
        self.catalog.set_completer(completer);
        self
    }

    /// Sets the subscription handler.
    pub fn subscriptions<H2: SubscriptionHandler>(self, handler: H2) -> SuiteBuilder<H2> {
        SuiteBuilder {
            info: self.info,
            instructions: self.instructions,
            discover_cache: self.discover_cache,
            list_cache: self.list_cache,
            tools_cache: self.tools_cache,
            prompts_cache: self.prompts_cache,
            resources_cache: self.resources_cache,
            read_cache: self.read_cache,
            page_size: self.page_size,
            cursor_ttl: self.cursor_ttl,
            request_state_ttl: self.request_state_ttl,
            secret: self.secret,
            logging: self.logging,
            catalog: self.catalog,
            handler,
        }
    }

    /// The suite.
    pub fn build(self) -> Suite<H> {
        let sealer = match self.secret {
            Some(key) => Sealer::new(key),
            None => Sealer::random(),
        };
        Suite {
            inner: Arc::new(Inner {
                info: self.info,
                instructions: self.instructions,
                discover_cache: self.discover_cache,
                list_cache: self.list_cache,
                tools_cache: self.tools_cache,
                prompts_cache: self.prompts_cache,
                resources_cache: self.resources_cache,
                read_cache: self.read_cache,
                page_size: self.page_size,
                cursor_ttl: self.cursor_ttl,
                request_state_ttl: self.request_state_ttl,
                sealer,
                logging: self.logging,
                catalog: self.catalog,
            }),
            handler: Arc::new(self.handler),
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

impl<H: SubscriptionHandler> Suite<H> {
    /// The server implementation.
    pub fn info(&self) -> &Implementation {
        &self.inner.info
    }

    /// The catalog.
    pub fn catalog(&self) -> &Catalog {
        &self.inner.catalog
    }

    /// The subscription handler.
    pub fn handler(&self) -> Arc<H> {
        self.handler.clone()
    }

    /// Stamps `_meta["io.modelcontextprotocol/serverInfo"]` on a result (creating
    /// `_meta` if needed).
    pub fn stamp_result(&self, result: &mut Map<String, Value>) {
        let meta = result
            .entry("_meta")
            .or_insert_with(|| Value::Object(Map::new()));
        if let Value::Object(meta) = meta {
            meta.insert(
                keys::SERVER_INFO.into(),
                serde_json::to_value(&self.inner.info).unwrap_or(Value::Null),
            );
        }
    }

    /// The handler's subscription capabilities for the request on `channel`. A
    /// panicking handler advertises nothing (and the panic is logged), so one bad
    /// callback cannot take down a transport.
    pub fn subscription_capabilities(
        &self,
        channel: &Channel,
    ) -> crate::protocol::SubscriptionCapabilities {
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            self.handler.subscription_capabilities(channel)
        }))
        .unwrap_or_else(|_| {
            tracing::error!("subscription_capabilities panicked; advertising nothing");
            crate::protocol::SubscriptionCapabilities::none()
        })
    }

    /// The capabilities advertised to the request on `channel`: a block for each
    /// kind the catalog serves, folded with the handler's subscription capabilities.
    pub fn capabilities(&self, channel: &Channel) -> ServerCapabilities {
        let catalog = &self.inner.catalog;
        let mut caps = ServerCapabilities::default();
        if catalog.has_tools() {
            caps.tools = Some(Default::default());
        }
        if catalog.has_prompts() {
            caps.prompts = Some(Default::default());
        }
        if catalog.has_resources() {
            caps.resources = Some(Default::default());
        }
        if catalog.has_completions() {
            caps.completions = Some(Map::new());
        }
        if self.inner.logging {
            caps.logging = Some(Map::new());
        }
        caps.fold_subscriptions(&self.subscription_capabilities(channel));
        caps
    }

    /// Whether the unary `method` is served to the request on `channel`: exactly
    /// the kinds [`Suite::capabilities`] advertises to it (a kind the handler
    /// advertises list changes for is served even while the catalog holds none of
    /// it, with empty lists), so discover and routing never disagree.
    fn serves(&self, method: &str, channel: &Channel) -> bool {
        if method == methods::DISCOVER {
            return true;
        }
        let caps = self.capabilities(channel);
        match method {
            methods::TOOLS_LIST | methods::TOOLS_CALL => caps.tools.is_some(),
            methods::PROMPTS_LIST | methods::PROMPTS_GET => caps.prompts.is_some(),
            methods::RESOURCES_LIST
            | methods::RESOURCES_TEMPLATES_LIST
            | methods::RESOURCES_READ => caps.resources.is_some(),
            methods::COMPLETE => caps.completions.is_some(),
            _ => false,
        }
    }

    /// How `method` is served to the request on `channel`, or `-32601` when it is
    /// unknown, removed, or gated by a capability this server does not advertise.
    pub fn route(&self, method: &str, channel: &Channel) -> Result<Route, McpError> {
        if method == methods::LISTEN {
            return if self.subscription_capabilities(channel).any() {
                Ok(Route::Listen)
            } else {
                Err(McpError::MethodNotFound(method.to_owned()))
            };
        }
        if self.serves(method, channel) {
            Ok(Route::Unary)
        } else {
            Err(McpError::MethodNotFound(method.to_owned()))
        }
    }

    /// The `Mcp-Param-*` headers a `tools/call` must carry: one per `x-mcp-header`
    /// argument of the tool present in the body with a string, integer or boolean
    /// value (absent and `null` arguments need no header; other types are left to
    /// argument validation). Other methods and unknown tools need none.
    pub fn param_headers(
        &self,
        method: &str,
        params: &Map<String, Value>,
    ) -> Result<Vec<ParamHeader>, McpError> {
        if method != methods::TOOLS_CALL {
            return Ok(Vec::new());
        }
        let Some(name) = params.get("name").and_then(Value::as_str) else {
            return Ok(Vec::new());
        };
        let Some(entry) = self.inner.catalog.tool_entry(name) else {
            return Ok(Vec::new());
        };
        let Ok(schema) = &entry.schema else {
            return Ok(Vec::new());
        };
        let Some(arguments) = params.get("arguments").and_then(Value::as_object) else {
            return Ok(Vec::new());
        };
        let mut out = Vec::new();
        for param in &schema.headers {
            let value = match schema::lookup(arguments, &param.path) {
                Some(v @ (Value::String(_) | Value::Bool(_))) => v.clone(),
                Some(Value::Number(n)) if n.is_i64() || n.is_u64() => Value::Number(n.clone()),
                _ => continue,
            };
            out.push(ParamHeader {
                header: format!("Mcp-Param-{}", param.name),
                value,
            });
        }
        Ok(out)
    }

    /// Answers one unary request. The result carries `resultType` and server info.
    pub fn call(
        &self,
        method: &str,
        params: Map<String, Value>,
        channel: Channel,
    ) -> BoxFuture<Result<Map<String, Value>, McpError>> {
        let suite = self.clone();
        let method = method.to_owned();
        Box::pin(async move {
            if !suite.serves(&method, &channel) {
                return Err(McpError::MethodNotFound(method));
            }
            let mut result = match method.as_str() {
                methods::DISCOVER => suite.discover(&channel),
                methods::TOOLS_LIST => suite.list_tools(&params)?,
                methods::TOOLS_CALL => suite.call_tool(params, channel).await?,
                methods::PROMPTS_LIST => suite.list_prompts(&params)?,
                methods::PROMPTS_GET => suite.get_prompt(params, channel).await?,
                methods::RESOURCES_LIST => suite.list_resources(&params, &channel).await?,
                methods::RESOURCES_TEMPLATES_LIST => suite.list_templates(&params)?,
                methods::RESOURCES_READ => suite.read_resource(params, channel).await?,
                methods::COMPLETE => suite.complete(params, channel).await?,
                _ => return Err(McpError::MethodNotFound(method)),
            };
            if !result.contains_key("resultType") {
                result.insert("resultType".into(), Value::from("complete"));
            }
            suite.stamp_result(&mut result);
            Ok(result)
        })
    }

    fn discover(&self, channel: &Channel) -> Map<String, Value> {
        let mut result = Map::new();
        result.insert("resultType".into(), Value::from("complete"));
        result.insert(
            "supportedVersions".into(),
            Value::from(SUPPORTED_VERSIONS.to_vec()),
        );
        result.insert(
            "capabilities".into(),
            serde_json::to_value(self.capabilities(channel)).unwrap_or_default(),
        );
        if let Some(text) = &self.inner.instructions {
            result.insert("instructions".into(), Value::from(text.clone()));
        }
        self.inner.discover_cache.apply(&mut result);
        result
    }

    // ---- pagination ----------------------------------------------------------

    /// The page of `items` the request's `cursor` points at, as `key` plus
    /// `nextCursor` when more follow. Cursors are sealed (offset, list kind,
    /// expiry); a tampered, foreign, expired or non-string cursor is `-32602`
    /// "Invalid cursor". A cursor past the end (the list shrank) gives an empty
    /// last page.
    fn page(
        &self,
        kind: &str,
        key: &str,
        items: Vec<Value>,
        params: &Map<String, Value>,
        hint: CacheHint,
    ) -> Result<Map<String, Value>, McpError> {
        let offset = match params.get("cursor") {
            None | Some(Value::Null) => 0,
            Some(Value::String(token)) => {
                let payload = self
                    .inner
                    .sealer
                    .open(purpose::CURSOR, token)
                    .ok_or_else(invalid_cursor)?;
                if payload.get("k").and_then(Value::as_str) != Some(kind) {
                    return Err(invalid_cursor());
                }
                match payload.get("exp").and_then(Value::as_u64) {
                    Some(exp) if !seal::expired(exp) => {}
                    _ => return Err(invalid_cursor()),
                }
                payload
                    .get("o")
                    .and_then(Value::as_u64)
                    .and_then(|o| usize::try_from(o).ok())
                    .ok_or_else(invalid_cursor)?
            }
            Some(_) => return Err(invalid_cursor()),
        };
        let total = items.len();
        let end = offset.saturating_add(self.inner.page_size).min(total);
        let page: Vec<Value> = items
            .into_iter()
            .skip(offset)
            .take(end.saturating_sub(offset))
            .collect();
        let mut result = Map::new();
        result.insert(key.into(), Value::Array(page));
        if end < total {
            let payload = json!({"k": kind, "o": end, "exp": seal::expiry(self.inner.cursor_ttl)});
            result.insert(
                "nextCursor".into(),
                Value::from(self.inner.sealer.seal(purpose::CURSOR, &payload)),
            );
        }
        hint.apply(&mut result);
        Ok(result)
    }

    // ---- tools ---------------------------------------------------------------

    fn list_tools(&self, params: &Map<String, Value>) -> Result<Map<String, Value>, McpError> {
        let tools: Vec<Value> = self
            .inner
            .catalog
            .tools()
            .iter()
            .map(|t| t.descriptor().to_json())
            .collect();
        let hint = self.inner.tools_cache.unwrap_or(self.inner.list_cache);
        self.page("tools", "tools", tools, params, hint)
    }

    fn retry(&self, params: &Map<String, Value>, binding: &Binding) -> Result<Retry, McpError> {
        mrtr::parse_retry(&self.inner.sealer, params, binding)
    }

    fn input_required(
        &self,
        round: InputRequired,
        channel: &Channel,
        binding: &Binding,
    ) -> Result<Map<String, Value>, McpError> {
        mrtr::input_required_result(
            &self.inner.sealer,
            self.inner.request_state_ttl,
            round,
            &channel.meta().client_capabilities,
            binding,
        )
    }

    async fn call_tool(
        &self,
        params: Map<String, Value>,
        channel: Channel,
    ) -> Result<Map<String, Value>, McpError> {
        let name = match params.get("name") {
            Some(Value::String(n)) => n.clone(),
            _ => {
                return Err(McpError::invalid_params(
                    "Invalid params: tools/call requires a string name",
                ));
            }
        };
        let arguments = match params.get("arguments") {
            None | Some(Value::Null) => Map::new(),
            Some(Value::Object(a)) => a.clone(),
            Some(_) => {
                return Err(McpError::invalid_params(
                    "Invalid params: arguments must be an object",
                ));
            }
        };
        let entry = self.inner.catalog.tool_entry(&name).ok_or_else(|| {
            McpError::invalid_params_with(format!("Unknown tool: {name}"), json!({"name": name}))
        })?;
        let schema = entry
            .schema
            .as_ref()
            .map_err(|e| McpError::internal(format!("Internal error: {e}")))?;
        schema.validate(&name, &arguments)?;
        let binding = Binding::new(
            methods::TOOLS_CALL,
            &name,
            &Value::Object(arguments.clone()),
        );
        let retry = self.retry(&params, &binding)?;
        let call = ToolCall {
            arguments,
            channel: channel.clone(),
            input_responses: retry.input_responses,
            request_state: retry.request_state,
        };
        match entry.tool.call(call).await? {
            ToolOutcome::Complete(result) => Ok(result.into_map()),
            ToolOutcome::InputRequired(round) => self.input_required(round, &channel, &binding),
        }
    }

    // ---- prompts -------------------------------------------------------------

    fn list_prompts(&self, params: &Map<String, Value>) -> Result<Map<String, Value>, McpError> {
        let prompts: Vec<Value> = self
            .inner
            .catalog
            .prompts()
            .iter()
            .map(|p| p.descriptor().to_json())
            .collect();
        let hint = self.inner.prompts_cache.unwrap_or(self.inner.list_cache);
        self.page("prompts", "prompts", prompts, params, hint)
    }

    async fn get_prompt(
        &self,
        params: Map<String, Value>,
        channel: Channel,
    ) -> Result<Map<String, Value>, McpError> {
        let Some(Value::String(name)) = params.get("name") else {
            return Err(McpError::invalid_params(
                "Invalid params: prompts/get requires a string name",
            ));
        };
        let prompt = self.inner.catalog.prompt(name).ok_or_else(|| {
            McpError::invalid_params_with(format!("Unknown prompt: {name}"), json!({"name": name}))
        })?;
        let arguments = prompt::check_arguments(prompt.descriptor(), &params)?;
        let binding = Binding::new(methods::PROMPTS_GET, name, &json!(arguments));
        let retry = self.retry(&params, &binding)?;
        let get = PromptGet {
            arguments,
            channel: channel.clone(),
            input_responses: retry.input_responses,
            request_state: retry.request_state,
        };
        match prompt.get(get).await? {
            PromptOutcome::Complete(result) => Ok(result.into_map()),
            PromptOutcome::InputRequired(round) => self.input_required(round, &channel, &binding),
        }
    }

    // ---- resources -----------------------------------------------------------

    /// The list hint over every provider: the smallest TTL, `private` if any is.
    fn resources_hint(&self, providers: &[Arc<dyn ResourceProvider>]) -> CacheHint {
        let fallback = self.inner.resources_cache.unwrap_or(self.inner.list_cache);
        let mut hints = providers.iter().map(|p| p.cache().unwrap_or(fallback));
        let Some(first) = hints.next() else {
            return fallback;
        };
        hints.fold(first, |a, b| CacheHint {
            ttl_ms: a.ttl_ms.min(b.ttl_ms),
            scope: if a.scope == CacheScope::Private || b.scope == CacheScope::Private {
                CacheScope::Private
            } else {
                CacheScope::Public
            },
        })
    }

    async fn list_resources(
        &self,
        params: &Map<String, Value>,
        channel: &Channel,
    ) -> Result<Map<String, Value>, McpError> {
        let providers = self.inner.catalog.resource_providers();
        let mut resources = Vec::new();
        for provider in &providers {
            resources.extend(provider.list(channel).await?.iter().map(Resource::to_json));
        }
        let hint = self.resources_hint(&providers);
        self.page("resources", "resources", resources, params, hint)
    }

    fn list_templates(&self, params: &Map<String, Value>) -> Result<Map<String, Value>, McpError> {
        let providers = self.inner.catalog.resource_providers();
        let templates: Vec<Value> = providers
            .iter()
            .flat_map(|p| p.templates())
            .map(|t| t.to_json())
            .collect();
        let hint = self.resources_hint(&providers);
        self.page("templates", "resourceTemplates", templates, params, hint)
    }

    async fn read_resource(
        &self,
        params: Map<String, Value>,
        channel: Channel,
    ) -> Result<Map<String, Value>, McpError> {
        let Some(Value::String(uri)) = params.get("uri") else {
            return Err(McpError::invalid_params(
                "Invalid params: resources/read requires a string uri",
            ));
        };
        let binding = Binding::new(methods::RESOURCES_READ, uri, &json!({}));
        let retry = self.retry(&params, &binding)?;
        let mut providers: Vec<_> = self
            .inner
            .catalog
            .resource_providers()
            .into_iter()
            .filter(|p| uri.starts_with(p.prefix()))
            .collect();
        providers.sort_by_key(|p| std::cmp::Reverse(p.prefix().len()));
        for provider in providers {
            let read = ResourceRead {
                uri: uri.clone(),
                variables: Map::new(),
                channel: channel.clone(),
                input_responses: retry.input_responses.clone(),
                request_state: retry.request_state.clone(),
            };
            match provider.read(read).await? {
                ReadOutcome::NotFound => continue,
                ReadOutcome::Complete(r) if r.contents.is_empty() => continue,
                ReadOutcome::Complete(r) => {
                    let mut result = Map::new();
                    result.insert(
                        "contents".into(),
                        serde_json::to_value(&r.contents).unwrap_or_default(),
                    );
                    let hint = if retry.is_retry() {
                        NO_CACHE
                    } else {
                        r.cache
                            .or(provider.cache())
                            .unwrap_or(self.inner.read_cache)
                    };
                    hint.apply(&mut result);
                    return Ok(result);
                }
                ReadOutcome::InputRequired(round) => {
                    return self.input_required(round, &channel, &binding);
                }
            }
        }
        Err(not_found(uri))
    }

    // ---- completion ----------------------------------------------------------

    async fn complete(
        &self,
        params: Map<String, Value>,
        channel: Channel,
    ) -> Result<Map<String, Value>, McpError> {
        let catalog = &self.inner.catalog;
        let completer = catalog
            .completer()
            .ok_or_else(|| McpError::MethodNotFound(methods::COMPLETE.into()))?;
        let (reference, argument, value, context) = completion::parse_request(&params)?;
        match &reference {
            CompletionRef::Prompt(name) => {
                let prompt = catalog.prompt(name).ok_or_else(|| {
                    McpError::invalid_params_with(
                        format!("Unknown prompt: {name}"),
                        json!({"name": name}),
                    )
                })?;
                if !prompt
                    .descriptor()
                    .arguments
                    .iter()
                    .any(|a| a.name == argument)
                {
                    return Err(McpError::invalid_params_with(
                        format!("Invalid params: prompt {name} has no argument {argument}"),
                        json!({"argument": argument}),
                    ));
                }
            }
            CompletionRef::Resource(uri) => {
                let template = catalog
                    .resource_providers()
                    .iter()
                    .flat_map(|p| p.templates())
                    .find(|t| t.uri_template == *uri)
                    .ok_or_else(|| {
                        McpError::invalid_params_with(
                            format!("Invalid params: no resource template {uri}"),
                            json!({"uri": uri}),
                        )
                    })?;
                if !template.variables().contains(&argument.as_str()) {
                    return Err(McpError::invalid_params_with(
                        format!("Invalid params: template {uri} has no variable {argument}"),
                        json!({"argument": argument}),
                    ));
                }
            }
        }
        let completion = completer
            .complete(CompletionRequest {
                reference,
                argument,
                value,
                context,
                channel,
            })
            .await?;
        let mut result = Map::new();
        result.insert("completion".into(), completion.into_json());
        Ok(result)
    }
}

#[cfg(test)]
mod tests;
