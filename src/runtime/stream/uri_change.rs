//! A 2025 session's `resources/subscribe` and `unsubscribe` while its stream
//! runs: one URI in place ([`SubscriptionHandler::change_uri`]), not a new
//! stream with a copy of the whole set.

use std::panic::{AssertUnwindSafe, catch_unwind};

use actix::prelude::*;

use super::{CloseReason, Phase, StopStream, Stream};
use crate::protocol::McpError;
use crate::subscription::{SubscriptionHandler, UriChange, UriChanged};

/// Runtime only: one URI of a 2025 session changed; for its running stream.
pub(crate) struct ChangeUri {
    /// The resource URI.
    pub(crate) uri: String,
    /// `resources/subscribe` (true) or `resources/unsubscribe`.
    pub(crate) subscribed: bool,
}

/// What the caller does next after a [`ChangeUri`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum UriOutcome {
    /// The stream took the change.
    Applied,
    /// The stream cannot take it: open a new one with the session's whole set.
    Restart,
}

impl Message for ChangeUri {
    type Result = Result<UriOutcome, McpError>;
}

/// The controls of a 2025 session's running stream.
#[derive(Clone)]
pub(crate) struct SessionStreamControl {
    /// Ends the stream.
    pub(crate) stop: Recipient<StopStream>,
    /// Changes one of its URIs.
    pub(crate) change: Recipient<ChangeUri>,
    /// What it listens on, for a handoff to another node.
    #[cfg_attr(
        not(feature = "redis"),
        allow(
            dead_code,
            reason = "only a handoff between the nodes of a Redis bus asks"
        )
    )]
    pub(crate) probe: Recipient<super::Probe>,
    /// Waits until it has handled what is queued for it.
    #[cfg_attr(
        not(feature = "redis"),
        allow(
            dead_code,
            reason = "only a handoff between the nodes of a Redis bus asks"
        )
    )]
    pub(crate) settle: Recipient<super::Settle>,
}

impl SessionStreamControl {
    pub(crate) fn new<H: SubscriptionHandler>(addr: Addr<Stream<H>>) -> Self {
        SessionStreamControl {
            stop: addr.clone().recipient(),
            change: addr.clone().recipient(),
            probe: addr.clone().recipient(),
            settle: addr.recipient(),
        }
    }
}

impl<H: SubscriptionHandler> Handler<ChangeUri> for Stream<H> {
    type Result = Result<UriOutcome, McpError>;

    /// An unsubscribe is applied first, without the handler's consent (no
    /// update for the URI follows); the handler is then told, to leave its
    /// sources. A subscribe is served once the handler has applied it. A
    /// change the stream has already (a URI it serves subscribed again, one
    /// it does not serve unsubscribed) is applied at once, and the handler is
    /// not told.
    fn handle(&mut self, msg: ChangeUri, ctx: &mut Self::Context) -> Self::Result {
        let ChangeUri { uri, subscribed } = msg;
        if self.phase != Phase::Open {
            // Ending, or it served nothing: a new stream takes the set.
            return Ok(UriOutcome::Restart);
        }
        if !subscribed {
            if !self.channel.change_session_uri(&uri, false) {
                return Ok(UriOutcome::Applied);
            }
        } else if self.channel.has_session_uri(&uri) {
            return Ok(UriOutcome::Applied);
        } else if !self.advertised.resources_updated {
            // Nothing of the kind is served on this stream.
            return Ok(UriOutcome::Applied);
        }
        let (Some(state), Some(inbox)) = (self.state.as_mut(), self.inbox.as_ref()) else {
            return Ok(UriOutcome::Restart);
        };
        let change = if subscribed {
            UriChange::Subscribed(&uri)
        } else {
            UriChange::Unsubscribed(&uri)
        };
        let handler = &self.handler;
        let channel = &self.channel;
        let outcome = catch_unwind(AssertUnwindSafe(|| {
            handler.change_uri(change, channel, inbox, &mut **state)
        }));
        match outcome {
            Ok(UriChanged::Applied) => {
                if subscribed {
                    self.channel.change_session_uri(&uri, true);
                }
                Ok(UriOutcome::Applied)
            }
            Ok(UriChanged::Restart) if subscribed => Ok(UriOutcome::Restart),
            Ok(UriChanged::Reject(error)) if subscribed => Err(error),
            Ok(UriChanged::Reject(error)) => {
                tracing::debug!(%error, "change_uri refused an unsubscribe; it is applied anyway");
                Ok(UriOutcome::Applied)
            }
            // Declined; a restart or a refusal for an unsubscribe is not needed.
            Ok(_) => Ok(UriOutcome::Applied),
            Err(_) => {
                tracing::error!("change_uri panicked; ending this stream");
                self.state = None;
                let error = McpError::internal("Internal error: subscription handler failed");
                self.fail(ctx, error.clone(), CloseReason::Panicked);
                Err(error)
            }
        }
    }
}
