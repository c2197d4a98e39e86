//! What every request of the endpoint passes on its head, before the body is
//! read: the failed-authentication limit of its client address (429),
//! authentication (401 / 403), the application's assigns hook (401), then the
//! request rate of its principal (429).

use std::time::Instant;

use actix_web::http::{StatusCode, header};
use actix_web::{HttpMessage as _, HttpRequest, HttpResponse};

use super::client::{address_key, client_ip};
use super::{AuthConfig, AuthError, MAX_BEARER_TOKEN_LEN, Principal};
use crate::mux::{Assigns, ClientAddr, LimitKey};
use crate::protocol::McpError;
use crate::protocol::jsonrpc::encode_error;
use crate::runtime::RequestOutcome;
use crate::subscription::SubscriptionHandler;
use crate::transport::http::HttpConfig;
use crate::transport::http::rate::RateLimiter;
use crate::transport::http::reply::{refusal, with_retry_after};
use crate::transport::http::state::AppState;

/// The bearer token of `Authorization`: `Ok(None)` without one (or with
/// another scheme), an error when it is malformed or repeated.
fn bearer(req: &HttpRequest) -> Result<Option<&str>, AuthError> {
    let mut values = req.headers().get_all(header::AUTHORIZATION);
    let Some(value) = values.next() else {
        return Ok(None);
    };
    if values.next().is_some() {
        return Err(AuthError::invalid("more than one Authorization header"));
    }
    let value = value
        .to_str()
        .map_err(|_| AuthError::invalid("malformed"))?;
    let Some((scheme, token)) = value.trim().split_once(' ') else {
        return Ok(None);
    };
    if !scheme.eq_ignore_ascii_case("bearer") {
        return Ok(None);
    }
    let token = token.trim();
    if token.is_empty() {
        return Ok(None);
    }
    if token.len() > MAX_BEARER_TOKEN_LEN {
        return Err(AuthError::invalid("too long"));
    }
    Ok(Some(token))
}

/// A `quoted-string` value safe for a challenge parameter.
fn quoted(s: &str) -> String {
    s.chars()
        .filter(|c| *c != '"' && *c != '\\' && !c.is_control())
        .collect()
}

/// Adds `scope="…"` (the scopes every request needs) to a 401 challenge, as
/// the MCP authorization rules ask, when any are configured.
fn push_required_scopes(value: &mut String, auth: &AuthConfig) {
    if !auth.required_scopes.is_empty() {
        value.push_str(&format!(
            ", scope=\"{}\"",
            quoted(&auth.required_scopes.join(" "))
        ));
    }
}

/// The 401 / 403 of a refused request, with its challenge; 503 when the
/// authenticator itself failed ([`AuthError::Config`]).
fn challenge(
    req: &HttpRequest,
    config: &HttpConfig,
    auth: &AuthConfig,
    error: &AuthError,
) -> HttpResponse {
    let url = super::metadata::metadata_url(req, config, auth);
    let mut value = format!("Bearer resource_metadata=\"{}\"", quoted(&url));
    let (status, message) = match error {
        AuthError::InsufficientScope { required } => {
            value.push_str(&format!(
                ", error=\"insufficient_scope\", scope=\"{}\"",
                quoted(&required.join(" "))
            ));
            (
                StatusCode::FORBIDDEN,
                "Forbidden: insufficient scope".to_owned(),
            )
        }
        AuthError::Missing => {
            push_required_scopes(&mut value, auth);
            (
                StatusCode::UNAUTHORIZED,
                "Unauthorized: a bearer token is required".to_owned(),
            )
        }
        AuthError::InvalidToken(why) => {
            value.push_str(&format!(
                ", error=\"invalid_token\", error_description=\"{}\"",
                quoted(why)
            ));
            push_required_scopes(&mut value, auth);
            (StatusCode::UNAUTHORIZED, format!("Unauthorized: {why}"))
        }
        AuthError::Config(why) => {
            // The server cannot check tokens (an authenticator's own failure):
            // not the client's fault, so no challenge that would send it to
            // re-authorise in a loop.
            tracing::error!(error = %why, "authenticator failed");
            let mut resp = refusal(
                StatusCode::SERVICE_UNAVAILABLE,
                "Service unavailable: the server cannot check tokens right now".to_owned(),
            );
            resp.head_mut()
                .set_connection_type(actix_web::http::ConnectionType::Close);
            return resp;
        }
    };
    let mut resp = refusal(status, message);
    if let Ok(v) = header::HeaderValue::from_str(&value) {
        resp.headers_mut().insert(header::WWW_AUTHENTICATE, v);
    }
    // The body was not read: do not reuse the connection.
    resp.head_mut()
        .set_connection_type(actix_web::http::ConnectionType::Close);
    resp
}

async fn authenticate(req: &HttpRequest, auth: &AuthConfig) -> Result<Principal, AuthError> {
    let token = bearer(req)?.ok_or(AuthError::Missing)?;
    let principal = auth.authenticator.authenticate(token).await?;
    if auth.required_scopes.iter().all(|s| principal.has_scope(s)) {
        Ok(principal)
    } else {
        Err(AuthError::InsufficientScope {
            required: auth.required_scopes.clone(),
        })
    }
}

/// A failed authentication reserved before the authenticator runs: given
/// back when dropped (a good token, a missing scope, the request abandoned
/// while authenticating), kept by [`Reserved::spend`] (a bad token).
struct Reserved<'a> {
    limit: &'a RateLimiter,
    key: &'a str,
    spent: bool,
}

impl Reserved<'_> {
    /// The token was bad: the failure stays counted.
    fn spend(mut self) {
        self.spent = true;
    }
}

impl Drop for Reserved<'_> {
    fn drop(&mut self) {
        if !self.spent {
            self.limit.refund(self.key);
        }
    }
}

/// A 429 before the body is read, naming `limit`, with `Retry-After`.
fn too_many(limit: &str, message: String, secs: u64) -> HttpResponse {
    let error = McpError::limit_exceeded(limit, message, secs);
    let mut resp = HttpResponse::TooManyRequests()
        .content_type("application/json")
        .body(encode_error(None, &error));
    // The body was not read: do not reuse the connection.
    resp.head_mut()
        .set_connection_type(actix_web::http::ConnectionType::Close);
    with_retry_after(resp, &error)
}

/// Runs the head checks of a request and builds its [`Assigns`]: the
/// authenticated [`Principal`] (also left in the request's extensions for the
/// assigns hook), whatever the hook adds, and the [`ClientAddr`]. Then takes
/// one request from the principal's rate limit.
pub(in crate::transport::http) async fn admit<H: SubscriptionHandler>(
    req: &HttpRequest,
    state: &AppState<H>,
) -> Result<Assigns, HttpResponse> {
    let config = &state.config;
    // Head refusals are counted under the method the routing header names
    // (a bounded label), since the body is never read.
    let count = |outcome| {
        let method = req
            .headers()
            .get(&crate::transport::http::headers::METHOD_HEADER)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("");
        state.server.record_request(method, outcome, None);
    };
    let client = client_ip(req, config);
    let address = address_key(client, config.ipv6_prefix);
    let principal = match &config.auth {
        Some(auth) => {
            // An address over its failed authentications is refused before the
            // authenticator runs again (a request without a token runs
            // nothing). The failure is reserved before the authenticator runs
            // (check and count in one step, so concurrent bad tokens cannot
            // all pass a check made before any of them failed) and given back
            // when the token was not a bad one.
            let reserved = match state.auth_failures.as_ref() {
                Some(limit) if req.headers().contains_key(header::AUTHORIZATION) => {
                    if let Err(secs) = limit.take(&address, Instant::now()) {
                        count(RequestOutcome::Limited);
                        return Err(too_many(
                            "auth_failures",
                            "Too many failed authentications from this address; retry later".into(),
                            secs,
                        ));
                    }
                    Some(Reserved {
                        limit,
                        key: &address,
                        spent: false,
                    })
                }
                _ => None,
            };
            let outcome = authenticate(req, auth).await;
            if let (Some(reserved), Err(AuthError::InvalidToken(_))) = (reserved, &outcome) {
                reserved.spend();
            }
            match outcome {
                Ok(p) => {
                    req.extensions_mut().insert(p.clone());
                    Some(p)
                }
                Err(e) => {
                    tracing::debug!(error = %e, "request refused by authentication");
                    count(match e {
                        AuthError::Config(_) => RequestOutcome::Error,
                        _ => RequestOutcome::Unauthorized,
                    });
                    return Err(challenge(req, config, auth, &e));
                }
            }
        }
        None => None,
    };
    let mut assigns = match &config.assigns {
        Some(hook) => hook(req).map_err(|why| {
            count(RequestOutcome::Unauthorized);
            let mut resp = refusal(StatusCode::UNAUTHORIZED, format!("Unauthorized: {why}"));
            let value = match &config.auth {
                Some(auth) => format!(
                    "Bearer resource_metadata=\"{}\"",
                    quoted(&super::metadata::metadata_url(req, config, auth))
                ),
                None => "Bearer".to_owned(),
            };
            if let Ok(v) = header::HeaderValue::from_str(&value) {
                resp.headers_mut().insert(header::WWW_AUTHENTICATE, v);
            }
            resp.head_mut()
                .set_connection_type(actix_web::http::ConnectionType::Close);
            resp
        })?,
        None => Assigns::new(),
    };
    if let Some(p) = principal {
        assigns = assigns.with(p);
    }
    // The rate limit counts by principal (the authenticator's or the hook's),
    // else by client address (IPv6 by prefix), else (no peer address) in one
    // shared bucket: never off.
    let key = match assigns.get::<Principal>() {
        Some(p) => format!("p:{}", p.subject()),
        None => address,
    };
    if let Some(ip) = client {
        assigns = assigns.with(ClientAddr(ip));
    }
    assigns = assigns.with(LimitKey(key.clone()));
    if let Some(rate) = &state.rate
        && let Err(secs) = rate.check(&key, Instant::now())
    {
        count(RequestOutcome::Limited);
        return Err(too_many(
            "requests_per_second",
            format!(
                "Too many requests: at most {} per second per principal (or per client address without one)",
                rate.per_second()
            ),
            secs,
        ));
    }
    Ok(assigns)
}
