//! The suite: the server's catalog (tools, resources, prompts, completions) plus one
//! subscription handler; it answers `server/discover` and every unary request.
//!
//! Unary requests are plain async functions here, not actors.

mod catalog;
mod content;
mod tool;

use std::sync::Arc;

use serde_json::{Map, Value};

pub use catalog::{Catalog, CatalogEvent, CatalogSubscriptions, topics};
pub use content::{CallToolResult, Content, ResourceContents};
pub use tool::{
    BoxFuture, FnTool, InputRequired, Tool, ToolBuilder, ToolCall, ToolDescriptor, ToolOutcome,
};

use crate::mux::Channel;
use crate::protocol::{
    CacheHint, Implementation, McpError, SUPPORTED_VERSIONS, ServerCapabilities, keys, methods,
};
use crate::subscription::{NoSubscriptions, SubscriptionHandler};

struct Inner {
    info: Implementation,
    instructions: Option<String>,
    discover_cache: CacheHint,
    list_cache: CacheHint,
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
pub struct SuiteBuilder<H> {
    info: Implementation,
    instructions: Option<String>,
    discover_cache: CacheHint,
    list_cache: CacheHint,
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

    /// Cache hint of the list results (default `ttlMs: 0`, `public`).
    pub fn list_cache(mut self, hint: CacheHint) -> Self {
        self.list_cache = hint;
        self
    }

    /// Uses `catalog` (shared: changes made through any clone are served).
    pub fn catalog(mut self, catalog: Catalog) -> Self {
        self.catalog = catalog;
        self
    }

    /// Adds a tool to the catalog.
    pub fn tool(self, tool: impl Tool) -> Self {
        self.catalog.add_tool(tool);
        self
    }

    /// Sets the subscription handler.
    pub fn subscriptions<H2: SubscriptionHandler>(self, handler: H2) -> SuiteBuilder<H2> {
        SuiteBuilder {
            info: self.info,
            instructions: self.instructions,
            discover_cache: self.discover_cache,
            list_cache: self.list_cache,
            catalog: self.catalog,
            handler,
        }
    }

    /// The suite.
    pub fn build(self) -> Suite<H> {
        Suite {
            inner: Arc::new(Inner {
                info: self.info,
                instructions: self.instructions,
                discover_cache: self.discover_cache,
                list_cache: self.list_cache,
                catalog: self.catalog,
            }),
            handler: Arc::new(self.handler),
        }
    }
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

    /// The capabilities advertised to the request on `channel`: the catalog's
    /// blocks, folded with the handler's subscription capabilities.
    pub fn capabilities(&self, channel: &Channel) -> ServerCapabilities {
        let mut caps = ServerCapabilities::default();
        if self.inner.catalog.has_tools() {
            caps.tools = Some(Default::default());
        }
        caps.fold_subscriptions(&self.handler.subscription_capabilities(channel));
        caps
    }

    /// How `method` is served to the request on `channel`, or `-32601` when it is
    /// unknown, removed, or gated by a capability this server does not advertise.
    pub fn route(&self, method: &str, channel: &Channel) -> Result<Route, McpError> {
        let not_found = || Err(McpError::MethodNotFound(method.to_owned()));
        match method {
            methods::DISCOVER => Ok(Route::Unary),
            methods::TOOLS_LIST | methods::TOOLS_CALL if self.inner.catalog.has_tools() => {
                Ok(Route::Unary)
            }
            methods::LISTEN if self.handler.subscription_capabilities(channel).any() => {
                Ok(Route::Listen)
            }
            _ => not_found(),
        }
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
            let mut result = match method.as_str() {
                methods::DISCOVER => suite.discover(&channel),
                methods::TOOLS_LIST => suite.list_tools(),
                methods::TOOLS_CALL => suite.call_tool(params, channel).await?,
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

    fn list_tools(&self) -> Map<String, Value> {
        let tools: Vec<Value> = self
            .inner
            .catalog
            .tools()
            .iter()
            .map(|t| t.descriptor().to_json())
            .collect();
        let mut result = Map::new();
        result.insert("tools".into(), Value::Array(tools));
        self.inner.list_cache.apply(&mut result);
        result
    }

    async fn call_tool(
        &self,
        mut params: Map<String, Value>,
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
        let arguments = match params.remove("arguments") {
            None | Some(Value::Null) => Map::new(),
            Some(Value::Object(a)) => a,
            Some(_) => {
                return Err(McpError::invalid_params(
                    "Invalid params: arguments must be an object",
                ));
            }
        };
        let tool = self
            .inner
            .catalog
            .tool(&name)
            .ok_or_else(|| McpError::invalid_params(format!("Unknown tool: {name}")))?;
        let call = ToolCall {
            arguments,
            channel,
            input_responses: Map::new(),
            request_state: None,
        };
        match tool.call(call).await? {
            ToolOutcome::Complete(result) => Ok(result.into_map()),
            ToolOutcome::InputRequired(_) => Err(McpError::internal(
                "Internal error: multi round-trip results are not enabled for this tool",
            )),
        }
    }
}
