//! The 2025-era compatibility layer (MCP 2025-11-25 and 2025-06-18), for every
//! transport: version negotiation and the `initialize` result, the 2025 shapes
//! of results and errors, the 2026-07-28 `_meta` built from a session's
//! `initialize`, the routing of 2025 requests onto the suite, a session's
//! run-time state (log level, subscribed URIs) and the bounded store of many
//! sessions' states (in this process, or in Redis for the nodes of one bus:
//! `shared`, with the `redis` feature; `single` without it), server-to-client requests as MRTR rounds, and the legacy
//! channel (a session's notifications served by a [`Stream`] actor).
//!
//! It sits between the transports and the runtime: it may use `runtime`,
//! `suite`, `mux` and `protocol`, never `transport`. What only HTTP has
//! (sessions as sealed headers, GET, DELETE, the POST parsing) stays in
//! `transport::http::compat`; the stdio transport keeps one session per pipe.
//! See `docs/compat-2025.md`.
//!
//! [`Stream`]: crate::runtime::Stream

mod channel;
mod events;
mod initialize;
mod meta;
mod rounds;
mod route;
mod shape;
#[cfg(feature = "redis")]
mod shared;
#[cfg(not(feature = "redis"))]
mod single;
mod state;
mod store;

pub(crate) use channel::LegacyStream;
pub(crate) use events::{EventBounds, EventId, EventStore, GET_STREAM, LogKey, Read, Resume};
pub(crate) use initialize::{initialize_result, negotiate};
pub(crate) use meta::ClientInit;
pub(crate) use rounds::{Asker, Pending, rounds};
pub(crate) use route::{LegacyRoute, answered_outcome, legacy_route, set_level, subscription_uri};
pub(crate) use shape::{encode_legacy_error, legacy_error, legacy_result};
#[cfg(feature = "redis")]
pub(crate) use shared::{
    Claim, Control, Cut, Fetched, PostBounds, PostCheck, PostFetched, PostKind, PostOpened,
    PostWrite, Prepared, SharedSessions, Taking, Unconfirmed, Writer,
};
#[cfg(not(feature = "redis"))]
pub(crate) use single::SharedSessions;
pub(crate) use state::SessionState;
pub(crate) use store::{Reservation, Reserve, SessionStore, StateKey, StoreBounds};

/// Claims the end of the shared session `sid` (expiring at the `u64`, ms
/// since the epoch) for the fleet's metrics: `Ok(true)` for the first claim
/// of the fleet (its caller records the end), `Ok(false)` when a node claimed
/// it already, `Err` when the shared store cannot say now (nothing is
/// recorded then: never twice).
pub(crate) type EndClaims = std::sync::Arc<
    dyn Fn(String, u64) -> crate::suite::BoxFuture<Result<bool, crate::protocol::McpError>>
        + Send
        + Sync,
>;

/// The 2025-era versions served, newest first.
pub const LEGACY_VERSIONS: &[&str] = &["2025-11-25", "2025-06-18"];

/// Whether a message opens a 2025 session: an `initialize` request without a
/// 2026-07-28 `_meta` version.
pub(crate) fn is_legacy_initialize(
    method: &str,
    params: Option<&serde_json::Map<String, serde_json::Value>>,
) -> bool {
    method == "initialize" && crate::protocol::RequestMeta::raw_version(params).is_none()
}
