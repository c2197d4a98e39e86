//! Catalog changes as events on the catalog's bus, and [`CatalogSubscriptions`],
//! the subscription handler that turns them into list-changed and
//! resource-updated notifications on listen streams.

use super::Catalog;
use crate::mux::Channel;
use crate::protocol::{Notification, SubscriptionCapabilities, SubscriptionFilter};
use crate::pubsub::{BusSubscription, Inbox};
use crate::subscription::{
    Flow, Subscribe, SubscribeCx, SubscriptionHandler, UriChange, UriChanged,
};

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
/// for the URIs a stream subscribed to (exact match). A 2025 session's
/// `resources/subscribe` is taken in place ([`SubscriptionHandler::change_uri`]).
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

/// The bus topics one stream of [`CatalogSubscriptions`] has joined.
pub struct CatalogStreamState {
    /// The list topics, held for the stream's life (dropping one leaves it).
    _lists: Vec<BusSubscription<CatalogEvent>>,
    /// [`topics::RESOURCE_UPDATED`], joined while any URI is subscribed.
    updates: Option<BusSubscription<CatalogEvent>>,
}

impl SubscriptionHandler for CatalogSubscriptions {
    type Message = CatalogEvent;
    type State = CatalogStreamState;

    fn subscribe(
        &self,
        filter: &SubscriptionFilter,
        cx: &mut SubscribeCx<'_, CatalogEvent>,
    ) -> Subscribe<Self::State> {
        let bus = self.catalog.events();
        let mut lists = Vec::new();
        if filter.tools_list_changed {
            lists.push(bus.subscribe(topics::TOOLS, cx.inbox()));
        }
        if filter.prompts_list_changed {
            lists.push(bus.subscribe(topics::PROMPTS, cx.inbox()));
        }
        if filter.resources_list_changed {
            lists.push(bus.subscribe(topics::RESOURCES, cx.inbox()));
        }
        let updates = (!filter.resource_subscriptions.is_empty())
            .then(|| bus.subscribe(topics::RESOURCE_UPDATED, cx.inbox()));
        Subscribe::Accept(CatalogStreamState {
            _lists: lists,
            updates,
        })
    }

    fn change_uri(
        &self,
        change: UriChange<'_>,
        _channel: &Channel,
        inbox: &Inbox<CatalogEvent>,
        state: &mut Self::State,
    ) -> UriChanged {
        // Updates are matched per URI by the channel: joining the topic once
        // is all a new URI needs (a stream that unsubscribed everything keeps
        // it, and skips the events).
        if let UriChange::Subscribed(_) = change
            && state.updates.is_none()
        {
            let bus = self.catalog.events();
            state.updates = Some(bus.subscribe(topics::RESOURCE_UPDATED, inbox.clone()));
        }
        UriChanged::Applied
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
                if !channel.honours_uri(&uri) {
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
