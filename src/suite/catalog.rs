//! The run-time catalog: tools (and, as they are added, resources and prompts),
//! plus the event bus that tells open listen streams when the catalog changes.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};

use super::tool::Tool;
use crate::mux::Channel;
use crate::protocol::{Notification, SubscriptionCapabilities, SubscriptionFilter};
use crate::pubsub::{Bus, BusSubscription};
use crate::subscription::{Flow, Subscribe, SubscribeCx, SubscriptionHandler};

/// A change of the catalog, published on [`Catalog::events`].
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum CatalogEvent {
    /// The tool list changed.
    ToolsChanged,
    /// The prompt list changed.
    PromptsChanged,
    /// The resource list changed.
    ResourcesChanged,
    /// The resource at this URI changed.
    ResourceUpdated(String),
}

/// Bus topics of [`CatalogEvent`]s.
pub mod topics {
    /// [`super::CatalogEvent::ToolsChanged`].
    pub const TOOLS: &str = "catalog/tools";
    /// [`super::CatalogEvent::PromptsChanged`].
    pub const PROMPTS: &str = "catalog/prompts";
    /// [`super::CatalogEvent::ResourcesChanged`].
    pub const RESOURCES: &str = "catalog/resources";
    /// [`super::CatalogEvent::ResourceUpdated`].
    pub const RESOURCE_UPDATED: &str = "catalog/resource-updated";
}

struct Inner {
    tools: RwLock<BTreeMap<String, Arc<dyn Tool>>>,
    tools_enabled: AtomicBool,
    events: Bus<CatalogEvent>,
}

/// The tools (and, later, resources and prompts) a suite serves, changeable at
/// run time. Cheap to clone; every clone is the same catalog.
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
            .finish()
    }
}

fn read<T>(l: &RwLock<T>) -> std::sync::RwLockReadGuard<'_, T> {
    l.read().unwrap_or_else(|p| p.into_inner())
}

fn write<T>(l: &RwLock<T>) -> std::sync::RwLockWriteGuard<'_, T> {
    l.write().unwrap_or_else(|p| p.into_inner())
}

impl Catalog {
    /// An empty catalog.
    pub fn new() -> Self {
        Catalog {
            inner: Arc::new(Inner {
                tools: RwLock::new(BTreeMap::new()),
                tools_enabled: AtomicBool::new(false),
                events: Bus::new(),
            }),
        }
    }

    /// The bus on which catalog changes are published.
    pub fn events(&self) -> &Bus<CatalogEvent> {
        &self.inner.events
    }

    /// Publishes `event` to every open listen stream that asked for it.
    pub fn publish(&self, event: CatalogEvent) -> usize {
        let topic = match &event {
            CatalogEvent::ToolsChanged => topics::TOOLS,
            CatalogEvent::PromptsChanged => topics::PROMPTS,
            CatalogEvent::ResourcesChanged => topics::RESOURCES,
            CatalogEvent::ResourceUpdated(_) => topics::RESOURCE_UPDATED,
        };
        self.inner.events.publish(topic, event)
    }

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
    pub fn add_tool(&self, tool: impl Tool) {
        self.add_tool_arc(Arc::new(tool));
    }

    /// Adds (or replaces) a shared tool and tells listening clients.
    pub fn add_tool_arc(&self, tool: Arc<dyn Tool>) {
        let name = tool.descriptor().name.clone();
        write(&self.inner.tools).insert(name, tool);
        self.enable_tools();
        self.publish(CatalogEvent::ToolsChanged);
    }

    /// Removes a tool; tells listening clients if it existed.
    pub fn remove_tool(&self, name: &str) -> bool {
        let removed = write(&self.inner.tools).remove(name).is_some();
        if removed {
            self.publish(CatalogEvent::ToolsChanged);
        }
        removed
    }

    /// The tool named `name`.
    pub fn tool(&self, name: &str) -> Option<Arc<dyn Tool>> {
        read(&self.inner.tools).get(name).cloned()
    }

    /// Every tool, in name order.
    pub fn tools(&self) -> Vec<Arc<dyn Tool>> {
        read(&self.inner.tools).values().cloned().collect()
    }

    /// Every tool name, in order.
    pub fn tool_names(&self) -> Vec<String> {
        read(&self.inner.tools).keys().cloned().collect()
    }

    /// The subscription kinds this catalog can feed.
    pub fn subscription_capabilities(&self) -> SubscriptionCapabilities {
        SubscriptionCapabilities::none().with_tools_list_changed(self.has_tools())
    }
}

/// A ready-made subscription handler that feeds catalog changes to listen streams:
/// tool list changes (and, once a catalog serves them, prompt and resource changes).
#[derive(Clone, Debug)]
pub struct CatalogSubscriptions {
    catalog: Catalog,
}

impl CatalogSubscriptions {
    /// A handler fed by `catalog`.
    pub fn new(catalog: &Catalog) -> Self {
        CatalogSubscriptions {
            catalog: catalog.clone(),
        }
    }
}

impl SubscriptionHandler for CatalogSubscriptions {
    type Message = CatalogEvent;
    type State = Vec<BusSubscription<CatalogEvent>>;

    fn subscribe(
        &self,
        filter: &SubscriptionFilter,
        cx: &mut SubscribeCx<'_, CatalogEvent>,
    ) -> Subscribe<Self::State> {
        let bus = self.catalog.events();
        let mut subs = Vec::new();
        if filter.tools_list_changed {
            subs.push(bus.subscribe(topics::TOOLS, cx.inbox()));
        }
        if filter.prompts_list_changed {
            subs.push(bus.subscribe(topics::PROMPTS, cx.inbox()));
        }
        if filter.resources_list_changed {
            subs.push(bus.subscribe(topics::RESOURCES, cx.inbox()));
        }
        if !filter.resource_subscriptions.is_empty() {
            subs.push(bus.subscribe(topics::RESOURCE_UPDATED, cx.inbox()));
        }
        Subscribe::Accept(subs)
    }

    fn handle_message(
        &self,
        event: CatalogEvent,
        channel: &Channel,
        _state: &mut Self::State,
    ) -> Flow {
        let notification = match event {
            CatalogEvent::ToolsChanged => Notification::tools_list_changed(),
            CatalogEvent::PromptsChanged => Notification::prompts_list_changed(),
            CatalogEvent::ResourcesChanged => Notification::resources_list_changed(),
            CatalogEvent::ResourceUpdated(uri) => {
                let wanted = channel
                    .honoured()
                    .is_some_and(|h| h.resource_subscriptions.iter().any(|u| *u == uri));
                if !wanted {
                    return Flow::Continue;
                }
                Notification::resource_updated(uri)
            }
        };
        // A refused send (client gone, overflow) is noticed by the runtime.
        let _ = channel.send_notification(notification);
        Flow::Continue
    }

    fn subscription_capabilities(&self, _channel: &Channel) -> SubscriptionCapabilities {
        self.catalog.subscription_capabilities()
    }
}
