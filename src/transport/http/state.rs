//! What every request of one endpoint shares ([`AppState`]), and the shared
//! state of its 2025-era path ([`Compat`]): a module below both the POST
//! handler and the 2025 path, so neither imports the other's internals.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use tokio::sync::Semaphore;

use super::config::{CompatConfig, HttpConfig};
use crate::compat::{EventBounds, EventStore, Pending, SessionStore, SharedSessions, StoreBounds};
use crate::runtime::Server;
use crate::subscription::SubscriptionHandler;
use crate::suite::Suite;

/// What every request of one endpoint shares: built once (outside the
/// `HttpServer::new` factory, which runs per worker) and registered as the
/// endpoint resource's app data.
pub(crate) struct AppState<H: SubscriptionHandler> {
    pub(crate) suite: Suite<H>,
    pub(crate) server: Server,
    pub(crate) config: HttpConfig,
    pub(crate) in_flight: Arc<Semaphore>,
    pub(crate) compat: Option<Arc<Compat>>,
    pub(crate) rate: Option<super::rate::RateLimiter>,
    /// Failed authentications per client address ([`super::auth::AuthConfig::failure_limit`]).
    pub(crate) auth_failures: Option<super::rate::RateLimiter>,
}

impl<H: SubscriptionHandler> AppState<H> {
    pub(crate) fn new(suite: Suite<H>, config: HttpConfig) -> Self {
        // With a Redis bus (shared tasks), 2025 sessions are shared too.
        let compat = config
            .compat
            .clone()
            .map(|c| Arc::new(Compat::new(c, suite.shared_node())));
        AppState {
            suite,
            server: Server::with_principal_of(config.limits.clone(), config.principal_of.clone()),
            in_flight: Arc::new(Semaphore::new(config.max_in_flight.max(1))),
            rate: config.rate_limit.map(super::rate::RateLimiter::new),
            auth_failures: config
                .auth
                .as_ref()
                .and_then(|a| a.failure_limit)
                .map(super::rate::RateLimiter::new),
            compat,
            config,
        }
    }
}

/// The shared state of the 2025-era path (one per endpoint): its settings,
/// the sessions' bounded state, and the server-to-client requests waiting for
/// an answer.
pub(crate) struct Compat {
    /// The settings (`HttpConfig::compat`).
    pub(crate) config: CompatConfig,
    /// What sessions remember beyond their token, bounded per principal.
    pub(crate) sessions: SessionStore,
    /// With a Redis bus ([`crate::suite::SuiteBuilder::shared_tasks`]): the
    /// same, in Redis, for every node; `sessions` then stays empty.
    pub(crate) shared: Option<SharedSessions>,
    /// Server-to-client requests waiting for an answer (owner: the session
    /// id; each counted against its principal).
    pub(crate) pending: Arc<Pending>,
    /// The events of the sessions' SSE streams, for `Last-Event-ID` replay.
    pub(crate) events: Arc<EventStore>,
    /// Live sessions by expiry, to record the duration of those never
    /// DELETEd.
    pub(crate) clock: Arc<super::compat::SessionClock>,
    generation: AtomicU64,
}

impl Compat {
    pub(crate) fn new(
        config: CompatConfig,
        node: Option<crate::suite::tasks::SharedTasks>,
    ) -> Self {
        let bounds = StoreBounds {
            max_sessions: config.max_session_states,
            max_uris: config.max_subscribed_uris,
            per_owner_sessions: config.max_session_states_per_principal,
            per_owner_uris: config.max_subscribed_uris_per_principal,
        };
        // With shared sessions, a session's end (its DELETE on any node, or
        // its expiry) is recorded by whichever node claims it first.
        let claims = node.clone().map(SharedSessions::end_claims);
        let clock = Arc::new(super::compat::SessionClock::new(
            config.max_session_states,
            config.session_ttl,
            claims,
        ));
        Compat {
            clock,
            sessions: SessionStore::new(bounds),
            shared: node.map(|node| SharedSessions::new(node, bounds)),
            pending: Arc::new(Pending::new(
                config.max_pending_requests,
                config.max_pending_requests_per_principal,
            )),
            events: Arc::new(EventStore::new(EventBounds {
                per_session_events: config.max_events_per_session,
                per_session_bytes: config.max_event_bytes_per_session,
                total_bytes: config.max_event_bytes,
                max_sessions: config.max_session_states,
                resume_window: config.resume_window,
            })),
            generation: AtomicU64::new(0),
            config,
        }
    }

    /// A number no other GET stream of this endpoint had (its request id).
    pub(crate) fn next_generation(&self) -> u64 {
        self.generation.fetch_add(1, Ordering::Relaxed) + 1
    }
}
