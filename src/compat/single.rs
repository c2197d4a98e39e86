//! 2025 sessions on one node: without the `redis` feature a session's state
//! lives in this process only ([`super::SessionStore`]). [`SharedSessions`]
//! has no value here, so an endpoint's shared sessions are always `None` and
//! the calls below are never made; they give the transports one code path
//! for both builds.

use super::{EndClaims, LegacyStream, StateKey, StoreBounds};
use crate::protocol::{LogLevel, McpError};
use crate::suite::tasks::SharedTasks;

/// Sessions shared through Redis: none without the `redis` feature.
pub(crate) enum SharedSessions {}

/// What one request reads of its session.
#[allow(dead_code, reason = "never made: no SharedSessions exists")]
pub(crate) struct Loaded {
    /// The session was DELETEd (on any node).
    pub(crate) deleted: bool,
    /// Its `logging/setLevel` level.
    pub(crate) level: Option<LogLevel>,
}

/// What DELETE found.
#[allow(dead_code, reason = "never made: no SharedSessions exists")]
pub(crate) struct Deleted {
    /// The GET stream held on this node, for the caller to stop.
    pub(crate) local: Option<LegacyStream>,
    /// Whether this DELETE records the session's end.
    pub(crate) ends: bool,
    /// Whether the GET stream's node confirmed it ended it.
    pub(crate) confirmed: Result<(), McpError>,
}

impl SharedSessions {
    /// Never called: no [`SharedTasks`] exists either.
    pub(crate) fn new(node: SharedTasks, _bounds: StoreBounds) -> Self {
        match node {}
    }

    /// Claims a session's end for the fleet's metrics.
    pub(crate) fn end_claims(node: SharedTasks) -> EndClaims {
        match node {}
    }

    /// The session's deleted mark and level.
    pub(crate) async fn load(&self, _sid: &str) -> Result<Loaded, McpError> {
        match *self {}
    }

    /// Sets the session's log level.
    pub(crate) async fn set_log_level(
        &self,
        _session: &StateKey<'_>,
        _level: LogLevel,
    ) -> Result<(), McpError> {
        match *self {}
    }

    /// Deletes the session.
    pub(crate) async fn delete(&self, _session: &StateKey<'_>) -> Result<Deleted, McpError> {
        match *self {}
    }
}
