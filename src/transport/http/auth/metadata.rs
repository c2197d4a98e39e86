//! The Protected Resource Metadata document (RFC 9728) and its URL.
//!
//! The `resource` it names is [`AuthConfig::resource`] when set; otherwise the
//! listening address (the server's own, never the client's `Host`) and the
//! path the endpoint is mounted at, or, from a trusted proxy, the forwarded
//! scheme and host.

use actix_web::http::{StatusCode, header};
use actix_web::{HttpRequest, HttpResponse, web};
use serde_json::{Map, Value, json};

use super::AuthConfig;
use super::client::trusted_peer;
use crate::subscription::SubscriptionHandler;
use crate::transport::http::HttpConfig;
use crate::transport::http::headers;
use crate::transport::http::reply::refusal;
use crate::transport::http::state::AppState;

/// The well-known path prefix (RFC 9728 §3).
pub(in crate::transport::http) const WELL_KNOWN: &str = "/.well-known/oauth-protected-resource";

/// The path an endpoint's service was registered at, relative to its
/// enclosing scope: resource-level app data of the endpoint's routes.
#[derive(Clone, Debug)]
pub(in crate::transport::http) struct MountPath(pub(in crate::transport::http) String);

/// The first value of a forwarded header (the hop nearest the client of a
/// comma-separated list is not ours to pick: a trusted proxy overwrites it).
fn forwarded<'a>(req: &'a HttpRequest, name: &str) -> Option<&'a str> {
    let value = req.headers().get(name)?.to_str().ok()?;
    let first = value.split(',').next()?.trim();
    (!first.is_empty()).then_some(first)
}

/// `scheme://authority` of the endpoint as its clients reach it: the
/// listening address (`https` under TLS); from a trusted proxy, its
/// `X-Forwarded-Proto` (`http` or `https`) and `X-Forwarded-Host` (or `Host`)
/// when they are allowed hosts.
fn origin(req: &HttpRequest, config: &HttpConfig) -> String {
    let app = req.app_config();
    let own_scheme = if app.secure() { "https" } else { "http" };
    let own = || format!("{own_scheme}://{}", app.local_addr());
    if !trusted_peer(req, config) {
        return own();
    }
    let scheme = forwarded(req, "x-forwarded-proto")
        .map(str::to_ascii_lowercase)
        .filter(|s| s == "http" || s == "https")
        .unwrap_or_else(|| own_scheme.to_owned());
    let host = forwarded(req, "x-forwarded-host")
        .or_else(|| req.headers().get(header::HOST)?.to_str().ok())
        .filter(|h| headers::authority_allowed(h, &config.allowed_hosts));
    match host {
        Some(host) => format!("{scheme}://{}", host.trim().to_ascii_lowercase()),
        None => own(),
    }
}

/// Where the endpoint `req` concerns is mounted: (the enclosing scope's
/// prefix, the endpoint's path within it). For a metadata request the prefix
/// is what precedes the well-known path; for the endpoint itself, what
/// precedes its path.
fn mount(req: &HttpRequest, config: &HttpConfig) -> (String, String) {
    let path = req.path();
    let own = req
        .app_data::<MountPath>()
        .map_or_else(|| config.path.clone(), |m| m.0.clone());
    if let Some(i) = path.rfind(WELL_KNOWN) {
        return (path[..i].to_owned(), own);
    }
    match path.strip_suffix(own.as_str()) {
        Some(prefix) => (prefix.to_owned(), own),
        // A path pattern of the application's: the path as requested.
        None => (String::new(), path.to_owned()),
    }
}

/// The canonical resource URL of the MCP endpoint `req` concerns.
pub(in crate::transport::http) fn resource_of(
    req: &HttpRequest,
    config: &HttpConfig,
    auth: &AuthConfig,
) -> String {
    if let Some(resource) = &auth.resource {
        return resource.clone();
    }
    let (prefix, path) = mount(req, config);
    format!("{}{prefix}{path}", origin(req, config))
}

/// `scheme://authority` of a URL (all of it without a path).
fn origin_of(url: &str) -> &str {
    let after_scheme = url.find("://").map_or(0, |i| i + 3);
    match url[after_scheme..].find(['/', '?', '#']) {
        Some(i) => &url[..after_scheme + i],
        None => url,
    }
}

/// The `resource_metadata` URL of the challenges: where this endpoint serves
/// its document (the path form, under the same scope as the endpoint), on the
/// origin of its resource.
pub(in crate::transport::http) fn metadata_url(
    req: &HttpRequest,
    config: &HttpConfig,
    auth: &AuthConfig,
) -> String {
    let resource = resource_of(req, config, auth);
    let (prefix, path) = mount(req, config);
    metadata_url_at(origin_of(&resource), &prefix, &path)
}

fn metadata_url_at(origin: &str, prefix: &str, path: &str) -> String {
    let path = path.trim_end_matches('/');
    format!("{origin}{prefix}{WELL_KNOWN}{path}")
}

/// `GET /.well-known/oauth-protected-resource[/<path>]`: the document; 404
/// when the endpoint has no authentication; 403 for a `Host` outside
/// [`HttpConfig::allowed_hosts`], as on the endpoint itself.
pub(in crate::transport::http) async fn metadata<H: SubscriptionHandler>(
    req: HttpRequest,
    state: web::Data<AppState<H>>,
) -> HttpResponse {
    let config = &state.config;
    if let Err(why) = headers::check_host(&req, &config.allowed_hosts) {
        return refusal(StatusCode::FORBIDDEN, format!("Forbidden: {why}"));
    }
    let Some(auth) = &config.auth else {
        return HttpResponse::NotFound().finish();
    };
    let mut doc = Map::new();
    doc.insert(
        "resource".into(),
        Value::from(resource_of(&req, config, auth)),
    );
    doc.insert(
        "authorization_servers".into(),
        json!(auth.authorization_servers),
    );
    if !auth.scopes_supported.is_empty() {
        doc.insert("scopes_supported".into(), json!(auth.scopes_supported));
    }
    doc.insert("bearer_methods_supported".into(), json!(["header"]));
    let mut resp = HttpResponse::Ok();
    resp.content_type("application/json")
        .insert_header((header::ACCESS_CONTROL_ALLOW_ORIGIN, "*"))
        .insert_header((header::CACHE_CONTROL, "max-age=3600"));
    if auth.resource.is_none() && !config.trusted_proxies.is_empty() {
        // The document then depends on what the proxy forwarded.
        resp.insert_header((header::VARY, "Host, X-Forwarded-Host, X-Forwarded-Proto"));
    }
    resp.body(Value::Object(doc).to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use actix_web::test::TestRequest;

    #[test]
    fn metadata_urls_insert_the_well_known_path_after_the_scope() {
        assert_eq!(
            metadata_url_at("https://mcp.example.com", "", "/mcp"),
            "https://mcp.example.com/.well-known/oauth-protected-resource/mcp"
        );
        assert_eq!(
            metadata_url_at("http://127.0.0.1:9", "/api", "/a/b/"),
            "http://127.0.0.1:9/api/.well-known/oauth-protected-resource/a/b"
        );
        assert_eq!(
            origin_of("https://mcp.example.com:8443"),
            "https://mcp.example.com:8443"
        );
        assert_eq!(origin_of("https://h/x/y?q"), "https://h");
    }

    #[test]
    fn the_origin_is_the_listening_address_unless_a_trusted_proxy_forwards_one() {
        let mut config = HttpConfig::default();
        let req = |peer: &str| {
            TestRequest::default()
                .peer_addr(peer.parse().unwrap())
                .insert_header(("host", "evil.example"))
                .insert_header(("x-forwarded-proto", "https"))
                .insert_header(("x-forwarded-host", "localhost:443"))
                .to_http_request()
        };
        // TestRequest listens on 127.0.0.1:8080.
        assert_eq!(origin(&req("10.0.0.1:5"), &config), "http://127.0.0.1:8080");
        config.trusted_proxies = vec!["10.0.0.1".parse().unwrap()];
        assert_eq!(origin(&req("10.0.0.1:5"), &config), "https://localhost:443");
        assert_eq!(origin(&req("10.0.0.2:5"), &config), "http://127.0.0.1:8080");
        // A forwarded host outside the allow-list is not believed either.
        let spoofed = TestRequest::default()
            .peer_addr("10.0.0.1:5".parse().unwrap())
            .insert_header(("x-forwarded-host", "evil.example"))
            .insert_header(("x-forwarded-proto", "javascript"))
            .to_http_request();
        assert_eq!(origin(&spoofed, &config), "http://127.0.0.1:8080");
    }
}
