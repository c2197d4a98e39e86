//! Catalog changes as events on the catalog's bus, and [`CatalogSubscriptions`],
//! the subscription handler that turns them into list-changed and
//! resource-updated notifications on listen streams.

use super::catalog::Catalog;
use crate::mux::Channel;
use crate::protocol::{Notification, SubscriptionCapabilities, SubscriptionFilter};
use crate::pubsub::BusSubscription;
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

/// A ready-made subscription handler that feeds catalog changes to listen
/// streams: list changes of tools, prompts and resources, and resource updates
/// for the URIs a stream subscribed to (exact match).
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
                    .is_some_and(|h| h.resource_subscriptions.contains(&uri));
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
