//! Authentication as an OAuth 2.1 resource server (the MCP authorization
//! rules): a bearer token in `Authorization` on every request, checked by an
//! [`Authenticator`] on the request head before the body is read, and the
//! Protected Resource Metadata (RFC 9728) that tells clients where to get one.
//!
//! - [`Authenticator`]: token in, [`Principal`] out, or an [`AuthError`].
//!   Built in: `JwtAuthenticator` (feature `jwt`: JWT access tokens checked
//!   against a JWKS file, issuer, audience and expiry) and [`TokenTable`] (a
//!   static table, for development and tests).
//! - [`AuthConfig`]: the authenticator plus what the metadata document says
//!   (resource, authorization servers, scopes) and the scopes every request
//!   needs. Set it as [`super::HttpConfig::auth`].
//!
//! A refusal is 401 with `WWW-Authenticate: Bearer resource_metadata="…"`
//! (plus `error="invalid_token"` when a token was sent), or 403 with
//! `error="insufficient_scope", scope="…"` when the token lacks a required
//! scope. The accepted [`Principal`] goes into the request's
//! [`crate::mux::Assigns`] (and, for the assigns hook, into the request's
//! extensions), so tools and `subscribe` see it.

mod client;
mod gate;
#[cfg(feature = "jwt")]
mod jwt;
mod metadata;
mod tokens;

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use super::RateLimit;

pub(super) use gate::admit;
#[cfg(feature = "jwt")]
#[cfg_attr(docsrs, doc(cfg(feature = "jwt")))]
pub use jwt::{DEFAULT_JWT_LEEWAY_SECS, JwtAuthenticator};
pub(super) use metadata::{MountPath, WELL_KNOWN, metadata};
pub use tokens::TokenTable;

pub use crate::mux::Principal;

/// Longest bearer token looked at (8 KiB); a longer one is refused as invalid
/// without being parsed.
pub const MAX_BEARER_TOKEN_LEN: usize = 8 * 1024;

/// Default of [`AuthConfig::failure_limit`]: 20 failed authentications per
/// minute per client address (a bucket of 20, one back every 3 s).
///
/// A client with a good token fails rarely (an expired token, refreshed and
/// retried), so 20 leaves room for a few misconfigured clients behind one
/// address, while a token guesser gets at most 28,800 guesses a day per
/// address and the authenticator (a JWT check, an introspection call) runs
/// at most 20 times a minute for it.
pub const DEFAULT_AUTH_FAILURES_PER_MINUTE: u32 = 20;

/// What [`Authenticator::authenticate`] returns.
pub type AuthFuture = Pin<Box<dyn Future<Output = Result<Principal, AuthError>> + Send>>;

/// Checks a bearer token: the application's plug for authentication.
///
/// It gets the token of the request's `Authorization: Bearer` header (never
/// one from the query string) and answers with the [`Principal`] it stands
/// for, or a refusal. It runs on the request head, before the body is read.
/// The audience check (the token was issued for this server) is its job:
/// never accept a token meant for another resource.
///
/// ```
/// use genmcp::http::auth::{AuthError, AuthFuture, Authenticator, Principal};
///
/// struct OneToken;
/// impl Authenticator for OneToken {
///     fn authenticate(&self, token: &str) -> AuthFuture {
///         let ok = token == "let-me-in";
///         Box::pin(async move {
///             if ok { Ok(Principal::new("guest")) } else { Err(AuthError::invalid("unknown token")) }
///         })
///     }
/// }
/// ```
pub trait Authenticator: Send + Sync + 'static {
    /// The principal `token` stands for, or why not.
    fn authenticate(&self, token: &str) -> AuthFuture;
}

/// Why a request was not authenticated, or an authenticator could not be set
/// up.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum AuthError {
    /// No bearer token: 401 with a challenge that has no `error` code.
    #[error("no bearer token")]
    Missing,
    /// A token that is malformed, expired, not for this server, or unknown:
    /// 401 `error="invalid_token"`. The text becomes `error_description`:
    /// keep it short and free of secrets.
    #[error("invalid token: {0}")]
    InvalidToken(String),
    /// A valid token without the scopes this request needs: 403
    /// `error="insufficient_scope"` with `scope` listing them.
    #[error("insufficient scope: {}", .required.join(" "))]
    InsufficientScope {
        /// Every scope the request needs.
        required: Vec<String>,
    },
    /// An authenticator could not be built (a bad JWKS or token file), or
    /// cannot check tokens right now. Returned by [`Authenticator::authenticate`]
    /// it answers 503 (no challenge: the client is not at fault).
    #[error("authentication setup: {0}")]
    Config(String),
}

impl AuthError {
    /// [`AuthError::InvalidToken`] with this description.
    pub fn invalid(why: impl Into<String>) -> Self {
        AuthError::InvalidToken(why.into())
    }
}

/// Authentication of an HTTP endpoint: the [`Authenticator`] and what the
/// Protected Resource Metadata says. Defaults: the resource URL is built from
/// the listening address and the mounted path unless set; no authorization
/// servers, no scopes required; 20 failed authentications per minute per
/// client address.
///
/// ```
/// use genmcp::http::auth::{AuthConfig, TokenTable};
/// let table = TokenTable::parse("tok-alice alice\n")?;
/// let mut config = genmcp::http::HttpConfig::default();
/// config.auth = Some(AuthConfig::new(table).scopes_supported(["mcp:tools"]));
/// # Ok::<(), genmcp::http::auth::AuthError>(())
/// ```
#[derive(Clone)]
#[non_exhaustive]
pub struct AuthConfig {
    /// Checks each bearer token.
    pub authenticator: Arc<dyn Authenticator>,
    /// This server's canonical resource URL (RFC 8707; e.g.
    /// `https://mcp.example.com/mcp`): `resource` of the metadata document,
    /// and the origin of the `resource_metadata` URL. Default `None`: the
    /// listening address (`http://127.0.0.1:8080`, `https` under TLS) and
    /// the path the endpoint is mounted at; from a
    /// [`super::HttpConfig::trusted_proxies`] peer, the forwarded scheme and
    /// host instead. Never from an untrusted `Host` or `X-Forwarded-*`. Set
    /// it when clients reach the server by a name (behind a proxy, on a
    /// wildcard address).
    pub resource: Option<String>,
    /// `authorization_servers` of the metadata document (issuer URLs; MCP
    /// wants at least one). Default: none (the JWT issuer with
    /// `AuthConfig::jwt`, feature `jwt`).
    pub authorization_servers: Vec<String>,
    /// `scopes_supported` of the metadata document (default: none, omitted).
    pub scopes_supported: Vec<String>,
    /// Scopes every request must carry (default: none); a valid token
    /// without them gets 403 `insufficient_scope`.
    pub required_scopes: Vec<String>,
    /// Failed authentications allowed per client address (default
    /// [`RateLimit::per_minute`]`(`[`DEFAULT_AUTH_FAILURES_PER_MINUTE`]`)`,
    /// at most 10,000 addresses tracked). A failure is a token the
    /// authenticator refused or a malformed `Authorization` (401
    /// `invalid_token`); a missing token, a missing scope and an
    /// authenticator outage are not. Once an address's bucket is empty, its
    /// requests carrying a token get 429 with `Retry-After`, before the
    /// authenticator runs, until a token is back. Addresses are grouped as
    /// for the rate limit ([`super::HttpConfig::ipv6_prefix`],
    /// [`super::HttpConfig::trusted_proxies`]); requests without a peer
    /// address share one bucket. `None` switches it off.
    pub failure_limit: Option<RateLimit>,
}

impl std::fmt::Debug for AuthConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AuthConfig")
            .field("resource", &self.resource)
            .field("authorization_servers", &self.authorization_servers)
            .field("scopes_supported", &self.scopes_supported)
            .field("required_scopes", &self.required_scopes)
            .field("failure_limit", &self.failure_limit)
            .finish_non_exhaustive()
    }
}

impl AuthConfig {
    /// Authentication by `authenticator`, with the defaults above.
    pub fn new(authenticator: impl Authenticator) -> Self {
        AuthConfig {
            authenticator: Arc::new(authenticator),
            resource: None,
            authorization_servers: Vec::new(),
            scopes_supported: Vec::new(),
            required_scopes: Vec::new(),
            failure_limit: Some(RateLimit::per_minute(DEFAULT_AUTH_FAILURES_PER_MINUTE)),
        }
    }

    /// JWT authentication: the resource is the audience, the authorization
    /// server the issuer (feature `jwt`).
    ///
    /// ```no_run
    /// use genmcp::http::auth::{AuthConfig, JwtAuthenticator};
    /// let jwt = JwtAuthenticator::from_jwks_file(
    ///     "jwks.json", "https://auth.example.com", "https://mcp.example.com/mcp")?;
    /// let mut config = genmcp::http::HttpConfig::default();
    /// // resource = the audience, authorization_servers = [the issuer]
    /// config.auth = Some(AuthConfig::jwt(jwt).scopes_supported(["mcp:tools"]));
    /// # Ok::<(), genmcp::http::auth::AuthError>(())
    /// ```
    #[cfg(feature = "jwt")]
    #[cfg_attr(docsrs, doc(cfg(feature = "jwt")))]
    pub fn jwt(jwt: JwtAuthenticator) -> Self {
        let resource = jwt.audience().to_owned();
        let issuer = jwt.issuer().to_owned();
        let mut config = AuthConfig::new(jwt);
        config.resource = Some(resource);
        config.authorization_servers = vec![issuer];
        config
    }

    /// With `resource` as the canonical resource URL.
    pub fn resource(mut self, resource: impl Into<String>) -> Self {
        self.resource = Some(resource.into());
        self
    }

    /// With `issuer` listed in `authorization_servers`.
    pub fn authorization_server(mut self, issuer: impl Into<String>) -> Self {
        self.authorization_servers.push(issuer.into());
        self
    }

    /// With these `scopes_supported`.
    pub fn scopes_supported<S: Into<String>>(
        mut self,
        scopes: impl IntoIterator<Item = S>,
    ) -> Self {
        self.scopes_supported = scopes.into_iter().map(Into::into).collect();
        self
    }

    /// With this limit of failed authentications per client address (`None`:
    /// none).
    pub fn failure_limit(mut self, limit: Option<RateLimit>) -> Self {
        self.failure_limit = limit;
        self
    }

    /// Requiring these scopes on every request.
    pub fn require_scopes<S: Into<String>>(mut self, scopes: impl IntoIterator<Item = S>) -> Self {
        self.required_scopes = scopes.into_iter().map(Into::into).collect();
        self
    }
}
