//! Catalog changes as events on the catalog's bus, and [`CatalogSubscriptions`],
//! the subscription handler that turns them into list-changed and
//! resource-updated notifications on listen streams.

use std::sync::{Arc, LazyLock};

use super::Catalog;
use crate::mux::{Channel, SharedNotification};
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

impl CatalogEvent {
    /// The bus topic of this event (one of [`topics`]).
    pub fn topic(&self) -> &'static str {
        match self {
            CatalogEvent::ToolsChanged => topics::TOOLS,
            CatalogEvent::PromptsChanged => topics::PROMPTS,
            CatalogEvent::ResourcesChanged => topics::RESOURCES,
            CatalogEvent::ResourceUpdated(_) => topics::RESOURCE_UPDATED,
        }
    }

    /// The notification listen streams get for this event, encoded: once per
    /// process for the list changes, once per call for a resource update.
    fn encode(&self) -> SharedNotification {
        static TOOLS: LazyLock<SharedNotification> =
            LazyLock::new(|| Notification::tools_list_changed().into());
        static PROMPTS: LazyLock<SharedNotification> =
            LazyLock::new(|| Notification::prompts_list_changed().into());
        static RESOURCES: LazyLock<SharedNotification> =
            LazyLock::new(|| Notification::resources_list_changed().into());
        match self {
            CatalogEvent::ToolsChanged => TOOLS.clone(),
            CatalogEvent::PromptsChanged => PROMPTS.clone(),
            CatalogEvent::ResourcesChanged => RESOURCES.clone(),
            CatalogEvent::ResourceUpdated(uri) => {
                Notification::resource_updated(uri.clone()).into()
            }
        }
    }
}

/// What [`Catalog::events`] carries: a [`CatalogEvent`] with its notification
/// encoded once for every stream that receives it. Cloning it (once per
/// subscriber) is one reference-count increment.
///
/// ```
/// use genmcp::suite::{CatalogEvent, CatalogMessage};
/// let msg = CatalogMessage::new(CatalogEvent::ResourceUpdated("note://1".into()));
/// assert_eq!(msg.event(), &CatalogEvent::ResourceUpdated("note://1".into()));
/// assert_eq!(msg.notification().uri(), Some("note://1"));
/// ```
#[derive(Clone, Debug)]
pub struct CatalogMessage(Arc<(CatalogEvent, SharedNotification)>);

impl CatalogMessage {
    /// `event` and its notification, encoded now.
    pub fn new(event: CatalogEvent) -> Self {
        let notification = event.encode();
        CatalogMessage(Arc::new((event, notification)))
    }

    /// The change.
    pub fn event(&self) -> &CatalogEvent {
        &self.0.0
    }

    /// Its notification, as listen streams get it.
    pub fn notification(&self) -> &SharedNotification {
        &self.0.1
    }

    /// The bus topic of the event (see [`CatalogEvent::topic`]).
    pub fn topic(&self) -> &'static str {
        self.event().topic()
    }
}

impl From<CatalogEvent> for CatalogMessage {
    fn from(event: CatalogEvent) -> Self {
        CatalogMessage::new(event)
    }
}

impl PartialEq for CatalogMessage {
    fn eq(&self, other: &Self) -> bool {
        self.event() == other.event()
    }
}

impl Eq for CatalogMessage {}

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
    _lists: Vec<BusSubscription<CatalogMessage>>,
    /// [`topics::RESOURCE_UPDATED`], joined while any URI is subscribed.
    updates: Option<BusSubscription<CatalogMessage>>,
}

impl SubscriptionHandler for CatalogSubscriptions {
    type Message = CatalogMessage;
    type State = CatalogStreamState;

    fn subscribe(
        &self,
        filter: &SubscriptionFilter,
        cx: &mut SubscribeCx<'_, CatalogMessage>,
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
        inbox: &Inbox<CatalogMessage>,
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
        msg: CatalogMessage,
        channel: &Channel,
        _state: &mut Self::State,
    ) -> Flow {
        if let CatalogEvent::ResourceUpdated(uri) = msg.event()
            && !channel.honours_uri(uri)
        {
            return Flow::Continue;
        }
        // Encoded once by the publisher; only the stream's id is spliced in.
        // A refused send (client gone, overflow) is noticed by the runtime.
        let _ = channel.send_shared(msg.notification().clone());
        Flow::Continue
    }

    fn subscription_capabilities(&self, _channel: &Channel) -> SubscriptionCapabilities {
        self.catalog.subscription_capabilities()
    }
}
