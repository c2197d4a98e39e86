//! The legacy channel: a 2025 session's notification stream, served by the
//! same [`Stream`] actor as a `subscriptions/listen`, under a connection
//! supervisor the transport owns (an HTTP GET's exchange, or the stdio pipe's).
//!
//! Its filter is everything the handler advertises plus the session's
//! `resources/subscribe` URIs; its channel (`Channel::for_legacy_listen`) sends
//! no acknowledgement, no subscription id and no completion result. A
//! subscribe or unsubscribe changes one URI of the running stream in place
//! ([`LegacyStream::change`], answered by the handler's `change_uri`); a
//! handler that cannot take it has the actor restarted with the whole set: the
//! new actor first (so the handler's `subscribe` sees the exact set), then the
//! old one is stopped (its `handle_close` runs).
//!
//! [`Stream`]: crate::runtime::Stream

use actix::Addr;

use crate::mux::{Assigns, Channel, Outbox};
use crate::protocol::{
    McpError, RequestId, RequestMeta, SubscriptionCapabilities, SubscriptionFilter,
};
use crate::runtime::{
    ChangeUri, CloseReason, Connection, Server, SessionStreamControl, StopStream, UriOutcome,
    spawn_legacy_stream,
};
use crate::subscription::SubscriptionHandler;
use crate::suite::Suite;

/// The legacy stream's filter: every kind the server advertises, plus the
/// session's subscribed URIs when resource updates are advertised.
pub(crate) fn legacy_filter(
    caps: &SubscriptionCapabilities,
    uris: Vec<String>,
) -> SubscriptionFilter {
    SubscriptionFilter {
        tools_list_changed: caps.tools_list_changed,
        prompts_list_changed: caps.prompts_list_changed,
        resources_list_changed: caps.resources_list_changed,
        resource_subscriptions: if caps.resources_updated {
            uris
        } else {
            Vec::new()
        },
        task_ids: Vec::new(),
    }
}

/// One session's legacy stream under `connection`, writing into `outbox`.
#[derive(Clone)]
pub(crate) struct LegacyStream {
    connection: Addr<Connection>,
    outbox: Outbox,
    meta: RequestMeta,
    assigns: Assigns,
    running: Option<SessionStreamControl>,
    generation: u64,
    /// The session's bounded protocol version label (its stream's span and
    /// session duration).
    version: &'static str,
}

impl LegacyStream {
    /// A stream not yet opened; `meta` is the session's ([`super::ClientInit::meta`]),
    /// `version` its negotiated version (`crate::runtime::version_label`).
    pub(crate) fn new(
        connection: Addr<Connection>,
        outbox: Outbox,
        meta: RequestMeta,
        assigns: Assigns,
        version: &'static str,
    ) -> Self {
        LegacyStream {
            connection,
            outbox,
            meta,
            assigns,
            running: None,
            generation: 0,
            version,
        }
    }

    /// Whether a stream actor runs (it ends on `Flow::Stop`, a panic, an
    /// overflow, or the connection's end).
    pub(crate) fn is_running(&self) -> bool {
        self.running.as_ref().is_some_and(|r| r.stop.connected())
    }

    /// What the handler advertises to this session.
    pub(crate) fn capabilities<H: SubscriptionHandler>(
        &self,
        suite: &Suite<H>,
    ) -> SubscriptionCapabilities {
        let probe = Channel::for_request(
            RequestId::Number(0),
            self.meta.clone(),
            self.assigns.clone(),
            self.outbox.clone(),
        );
        suite.subscription_capabilities(&probe)
    }

    /// The connection supervising the stream (alive while its transport is).
    pub(crate) fn connection(&self) -> &Addr<Connection> {
        &self.connection
    }

    /// Whether the stream's connection is still alive.
    pub(crate) fn alive(&self) -> bool {
        self.connection.connected()
    }

    /// Starts a stream actor with `uris` under request id `id`, without
    /// installing it (see [`Self::install`]): the running one, if any, keeps
    /// running meanwhile. `Ok(None)` when the handler advertises nothing.
    pub(crate) async fn start<H: SubscriptionHandler>(
        &self,
        suite: &Suite<H>,
        server: &Server,
        uris: Vec<String>,
        id: RequestId,
    ) -> Result<Option<SessionStreamControl>, McpError> {
        let caps = self.capabilities(suite);
        if !caps.any() {
            return Ok(None);
        }
        spawn_legacy_stream(
            suite,
            server,
            &self.connection,
            self.outbox.clone(),
            id,
            self.meta.clone(),
            self.assigns.clone(),
            legacy_filter(&caps, uris),
            self.is_running(),
            self.version,
        )
        .await
        .map(Some)
    }

    /// Installs a started stream actor; returns the one it replaces (for the
    /// caller to stop).
    pub(crate) fn install(
        &mut self,
        started: SessionStreamControl,
    ) -> Option<SessionStreamControl> {
        self.running.replace(started)
    }

    /// The running stream actor, if any.
    pub(crate) fn running(&self) -> Option<&SessionStreamControl> {
        self.running.as_ref()
    }

    /// Changes one URI of the running stream in place (`subscribed`: a
    /// `resources/subscribe`). [`UriOutcome::Restart`] when no stream runs or
    /// its handler cannot take the change: the caller opens the stream again
    /// with the session's whole set. An error (the handler refused, or
    /// panicked and its stream ended): the session's set must be left as it
    /// was.
    pub(crate) async fn change(&self, uri: &str, subscribed: bool) -> Result<UriOutcome, McpError> {
        let Some(running) = self.running.as_ref().filter(|r| r.change.connected()) else {
            return Ok(UriOutcome::Restart);
        };
        let change = ChangeUri {
            uri: uri.to_owned(),
            subscribed,
        };
        match running.change.send(change).await {
            Ok(outcome) => outcome,
            // It ended meanwhile.
            Err(_) => Ok(UriOutcome::Restart),
        }
    }

    /// Opens the stream with `uris`, replacing the running one (stopped once
    /// the new one runs, `CloseReason::Cancelled`). Nothing opens when the
    /// handler advertises nothing. On error the running stream, if any, keeps
    /// its earlier filter.
    pub(crate) async fn open<H: SubscriptionHandler>(
        &mut self,
        suite: &Suite<H>,
        server: &Server,
        uris: Vec<String>,
    ) -> Result<(), McpError> {
        self.generation += 1;
        let id = RequestId::String(format!("genmcp-legacy-{}", self.generation));
        let Some(stop) = self.start(suite, server, uris, id).await? else {
            return Ok(());
        };
        if let Some(old) = self.install(stop) {
            let _ = old.stop.send(StopStream(CloseReason::Cancelled)).await;
        }
        Ok(())
    }
}
