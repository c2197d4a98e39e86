//! Streamable HTTP (2026-07-28) on actix-web: `POST /mcp` only, one JSON-RPC
//! message per POST, JSON or SSE replies, listen streams as SSE.
//!
//! - [`config`](HttpConfig): every bound and setting.
//! - mount: [`Endpoint`], an ordinary actix-web service for the application's
//!   own `App` (`App::configure(genmcp::http::mount(&endpoint))`,
//!   `App::service`, inside `web::scope`), and [`DrainHandle`], the graceful
//!   drain to await before stopping the application's server.
//! - post: the handler. Validation runs in the order the reference fixes (see
//!   `docs/http.md`): Host and Origin (403), method (405), in-flight limit (503),
//!   Accept (406), Content-Type (415), declared body size (413), the assigns hook
//!   on the head ([`auth`]: failed authentications per client address 429,
//!   then 401 / 403), the rate per principal (429), body (413 past the size, 408 past the body deadline),
//!   JSON (-32700), envelope (-32600), notifications (202), header/body
//!   cross-checks (-32020), `_meta` (-32602), version (-32022), required headers
//!   (-32020), method (-32601, 404), params (-32602), dispatch. Every bound is
//!   listed in `docs/security.md`.
//! - compat: the HTTP side of the 2025-11-25 / 2025-06-18 path (sessions as
//!   headers, the GET stream, DELETE, the POST parsing), routed from the POST
//!   handler; the rest is the transport-independent `crate::compat` (see
//!   `docs/compat-2025.md`).
//! - state, reply, sse: what the POST handler and the 2025 path share
//!   (`AppState`, refusals, the SSE response), below both.
//! - server: [`start`], [`serve`], [`ServerThread`], conveniences that run an
//!   `HttpServer` of their own around one [`Endpoint`].

pub mod auth;
mod compat;
mod config;
mod headers;
mod mount;
mod post;
mod rate;
mod refused;
mod reply;
mod server;
mod sse;
mod state;

pub use crate::compat::LEGACY_VERSIONS;
pub use config::{AssignsHook, CompatConfig, DEFAULT_IPV6_PREFIX, HttpConfig};
pub use headers::decode_value as decode_header_value;
pub use mount::{DrainHandle, Endpoint, EndpointService, mount};
pub use rate::{DEFAULT_MAX_RATE_PRINCIPALS, RateLimit};
pub use server::{Running, ServerThread, serve, shutdown_signal, start};
