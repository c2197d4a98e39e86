//! The run-time catalog: tools, prompts, resource providers and the completer,
//! plus the event bus that tells open listen streams when the catalog changes
//! (the events and the ready-made handler are in `events.rs`).
//!
//! Tools and prompts are served in insertion order (replacing one keeps its
//! place); resource providers are listed in insertion order too.

mod events;
mod ordered;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};

use crate::protocol::SubscriptionCapabilities;
use crate::pubsub::Bus;
use crate::suite::completions::Completer;
use crate::suite::prompts::Prompt;
use crate::suite::resources::ResourceProvider;
use crate::suite::schemas::{CompiledSchema, ToolError};
use crate::suite::tools::Tool;
pub use events::{CatalogEvent, CatalogMessage, CatalogStreamState, CatalogSubscriptions, topics};
use ordered::Ordered;

/// A tool with its compiled input schema (or why it did not compile).
pub(crate) struct ToolEntry {
    pub tool: Arc<dyn Tool>,
    pub schema: Result<CompiledSchema, ToolError>,
}

struct Inner {
    tools: RwLock<Ordered<ToolEntry>>,
    prompts: RwLock<Ordered<dyn Prompt>>,
    resources: RwLock<Vec<Arc<dyn ResourceProvider>>>,
    completer: RwLock<Option<Arc<dyn Completer>>>,
    tools_enabled: AtomicBool,
    prompts_enabled: AtomicBool,
    resources_enabled: AtomicBool,
    events: Bus<CatalogMessage>,
}

/// The tools, prompts, resources and completions a suite serves, changeable at
/// run time. Cheap to clone; every clone is the same catalog.
///
/// Every change publishes the matching [`CatalogEvent`] to open listen streams.
/// A kind is served (advertised in `server/discover`, routed) once something of
/// it was added, or once enabled explicitly (`enable_tools`, ...); it stays
/// served when its last item is removed.
#[derive(Clone)]
pub struct Catalog {
    inner: Arc<Inner>,
}

impl Default for Catalog {
    fn default() -> Self {
        Self::new()
    }
}

impl std::fmt::Debug for Catalog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Catalog")
            .field("tools", &self.tool_names())
            .field("prompts", &self.prompt_names())
            .field(
                "resource_prefixes",
                &self
                    .resource_providers()
                    .iter()
                    .map(|p| p.prefix().to_owned())
                    .collect::<Vec<_>>(),
            )
            .field("completions", &self.has_completions())
            .finish()
    }
}

/// A weak handle to a [`Catalog`] (see [`Catalog::downgrade`]).
#[derive(Clone, Debug)]
pub struct WeakCatalog {
    inner: std::sync::Weak<Inner>,
}

impl WeakCatalog {
    /// The catalog, if it is still alive.
    pub fn upgrade(&self) -> Option<Catalog> {
        self.inner.upgrade().map(|inner| Catalog { inner })
    }
}

fn read<T: ?Sized>(l: &RwLock<T>) -> std::sync::RwLockReadGuard<'_, T> {
    l.read().unwrap_or_else(|p| p.into_inner())
}

fn write<T: ?Sized>(l: &RwLock<T>) -> std::sync::RwLockWriteGuard<'_, T> {
    l.write().unwrap_or_else(|p| p.into_inner())
}

impl Catalog {
    /// An empty catalog.
    pub fn new() -> Self {
        Catalog {
            inner: Arc::new(Inner {
                tools: RwLock::new(Ordered::new()),
                prompts: RwLock::new(Ordered::new()),
                resources: RwLock::new(Vec::new()),
                completer: RwLock::new(None),
                tools_enabled: AtomicBool::new(false),
                prompts_enabled: AtomicBool::new(false),
                resources_enabled: AtomicBool::new(false),
                events: Bus::new(),
            }),
        }
    }

    /// The bus on which catalog changes are published.
    pub fn events(&self) -> &Bus<CatalogMessage> {
        &self.inner.events
    }

    /// Publishes `event` to every open listen stream that asked for it; returns
    /// the number of streams reached.
    /// The event's notification is encoded once here, for all of them.
    pub fn publish(&self, event: CatalogEvent) -> usize {
        let msg = CatalogMessage::new(event);
        self.inner.events.publish(msg.topic(), msg)
    }

    /// A handle that does not keep the catalog alive (for tools that change the
    /// catalog they live in, without a reference cycle).
    pub fn downgrade(&self) -> WeakCatalog {
        WeakCatalog {
            inner: Arc::downgrade(&self.inner),
        }
    }

    // ---- tools -------------------------------------------------------------

    /// Serves tools even while the catalog holds none (so `tools/list` answers
    /// and `tools` is advertised).
    pub fn enable_tools(&self) {
        self.inner.tools_enabled.store(true, Ordering::Release);
    }

    /// Whether tools are served.
    pub fn has_tools(&self) -> bool {
        self.inner.tools_enabled.load(Ordering::Acquire)
    }

    /// Adds (or replaces) a tool and tells listening clients.
    ///
    /// Its input (and output) schema is compiled now. A schema that does not
    /// compile, or has an invalid `x-mcp-header` annotation, is logged as an
    /// error and the tool is still listed, but every call answers `-32603`
    /// `"Internal error: tool unavailable"` (the detail stays in the log). Use
    /// [`Catalog::try_add_tool`] to refuse such a tool instead.
    pub fn add_tool(&self, tool: impl Tool) {
        self.add_tool_arc(Arc::new(tool));
    }

    /// [`Catalog::add_tool`] for a shared tool.
    pub fn add_tool_arc(&self, tool: Arc<dyn Tool>) {
        let d = tool.descriptor();
        let schema = CompiledSchema::compile(&d.name, &d.input_schema, d.output_schema.as_ref());
        if let Err(e) = &schema {
            tracing::error!(error = %e, "tool added with an invalid schema: its calls answer -32603");
        }
        self.insert_tool(tool, schema);
    }

    /// Adds (or replaces) a tool whose input and output schemas compile and whose
    /// `x-mcp-header` annotations are valid; otherwise refuses it (nothing changes).
    pub fn try_add_tool(&self, tool: impl Tool) -> Result<(), ToolError> {
        self.try_add_tool_arc(Arc::new(tool))
    }

    /// [`Catalog::try_add_tool`] for a shared tool.
    pub fn try_add_tool_arc(&self, tool: Arc<dyn Tool>) -> Result<(), ToolError> {
        let d = tool.descriptor();
        let schema = CompiledSchema::compile(&d.name, &d.input_schema, d.output_schema.as_ref())?;
        self.insert_tool(tool, Ok(schema));
        Ok(())
    }

    fn insert_tool(&self, tool: Arc<dyn Tool>, schema: Result<CompiledSchema, ToolError>) {
        let name = tool.descriptor().name.clone();
        write(&self.inner.tools).insert(name, Arc::new(ToolEntry { tool, schema }));
        self.enable_tools();
        self.publish(CatalogEvent::ToolsChanged);
    }

    /// Removes a tool; tells listening clients if it existed.
    pub fn remove_tool(&self, name: &str) -> bool {
        let removed = write(&self.inner.tools).remove(name);
        if removed {
            self.publish(CatalogEvent::ToolsChanged);
        }
        removed
    }

    /// The tool named `name`.
    pub fn tool(&self, name: &str) -> Option<Arc<dyn Tool>> {
        read(&self.inner.tools).get(name).map(|e| e.tool.clone())
    }

    pub(crate) fn tool_entry(&self, name: &str) -> Option<Arc<ToolEntry>> {
        read(&self.inner.tools).get(name)
    }

    /// Every tool, in insertion order.
    pub fn tools(&self) -> Vec<Arc<dyn Tool>> {
        read(&self.inner.tools)
            .values()
            .into_iter()
            .map(|e| e.tool.clone())
            .collect()
    }

    /// Every tool name, in insertion order.
    pub fn tool_names(&self) -> Vec<String> {
        read(&self.inner.tools).names()
    }

    // ---- prompts -----------------------------------------------------------

    /// Serves prompts even while the catalog holds none.
    pub fn enable_prompts(&self) {
        self.inner.prompts_enabled.store(true, Ordering::Release);
    }

    /// Whether prompts are served.
    pub fn has_prompts(&self) -> bool {
        self.inner.prompts_enabled.load(Ordering::Acquire)
    }

    /// Adds (or replaces) a prompt and tells listening clients.
    pub fn add_prompt(&self, prompt: impl Prompt) {
        self.add_prompt_arc(Arc::new(prompt));
    }

    /// Adds (or replaces) a shared prompt and tells listening clients.
    pub fn add_prompt_arc(&self, prompt: Arc<dyn Prompt>) {
        let name = prompt.descriptor().name.clone();
        write(&self.inner.prompts).insert(name, prompt);
        self.enable_prompts();
        self.publish(CatalogEvent::PromptsChanged);
    }

    /// Removes a prompt; tells listening clients if it existed.
    pub fn remove_prompt(&self, name: &str) -> bool {
        let removed = write(&self.inner.prompts).remove(name);
        if removed {
            self.publish(CatalogEvent::PromptsChanged);
        }
        removed
    }

    /// The prompt named `name`.
    pub fn prompt(&self, name: &str) -> Option<Arc<dyn Prompt>> {
        read(&self.inner.prompts).get(name)
    }

    /// Every prompt, in insertion order.
    pub fn prompts(&self) -> Vec<Arc<dyn Prompt>> {
        read(&self.inner.prompts).values()
    }

    /// Every prompt name, in insertion order.
    pub fn prompt_names(&self) -> Vec<String> {
        read(&self.inner.prompts).names()
    }

    // ---- resources ---------------------------------------------------------

    /// Serves resources even while the catalog has no provider.
    pub fn enable_resources(&self) {
        self.inner.resources_enabled.store(true, Ordering::Release);
    }

    /// Whether resources are served.
    pub fn has_resources(&self) -> bool {
        self.inner.resources_enabled.load(Ordering::Acquire)
    }

    /// Adds a resource provider (replacing one with the same prefix) and tells
    /// listening clients the resource list changed.
    pub fn add_resources(&self, provider: impl ResourceProvider) {
        self.add_resources_arc(Arc::new(provider));
    }

    /// [`Catalog::add_resources`] for a shared provider.
    pub fn add_resources_arc(&self, provider: Arc<dyn ResourceProvider>) {
        {
            let mut list = write(&self.inner.resources);
            match list.iter().position(|p| p.prefix() == provider.prefix()) {
                Some(i) => list[i] = provider,
                None => list.push(provider),
            }
        }
        self.enable_resources();
        self.publish(CatalogEvent::ResourcesChanged);
    }

    /// Removes the provider of `prefix`; tells listening clients if it existed.
    pub fn remove_resources(&self, prefix: &str) -> bool {
        let removed = {
            let mut list = write(&self.inner.resources);
            let before = list.len();
            list.retain(|p| p.prefix() != prefix);
            list.len() != before
        };
        if removed {
            self.publish(CatalogEvent::ResourcesChanged);
        }
        removed
    }

    /// Every resource provider, in insertion order.
    pub fn resource_providers(&self) -> Vec<Arc<dyn ResourceProvider>> {
        read(&self.inner.resources).clone()
    }

    /// Tells listening clients that the resource list changed (call it when a
    /// provider's own contents change).
    pub fn resources_changed(&self) -> usize {
        self.publish(CatalogEvent::ResourcesChanged)
    }

    /// Tells listening clients subscribed to `uri` that the resource changed
    /// (`notifications/resources/updated`; exact URI match).
    pub fn resource_updated(&self, uri: impl Into<String>) -> usize {
        self.publish(CatalogEvent::ResourceUpdated(uri.into()))
    }

    // ---- completion --------------------------------------------------------

    /// Sets the completer (`completion/complete` is served and `completions`
    /// advertised from now on).
    pub fn set_completer(&self, completer: impl Completer) {
        *write(&self.inner.completer) = Some(Arc::new(completer));
    }

    /// The completer, if any.
    pub fn completer(&self) -> Option<Arc<dyn Completer>> {
        read(&self.inner.completer).clone()
    }

    /// Whether completion is served.
    pub fn has_completions(&self) -> bool {
        read(&self.inner.completer).is_some()
    }

    /// The subscription kinds this catalog can feed: list changes of every kind
    /// it serves, and resource updates when it serves resources.
    pub fn subscription_capabilities(&self) -> SubscriptionCapabilities {
        let resources = self.has_resources();
        SubscriptionCapabilities::none()
            .with_tools_list_changed(self.has_tools())
            .with_prompts_list_changed(self.has_prompts())
            .with_resources_list_changed(resources)
            .with_resources_updated(resources)
    }
}
