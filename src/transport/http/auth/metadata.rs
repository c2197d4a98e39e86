//! The Protected Resource Metadata document (RFC 9728) and its URL.

use actix_web::http::header;
use actix_web::{HttpRequest, HttpResponse, web};
use serde_json::{Map, Value, json};

use super::AuthConfig;
use crate::subscription::SubscriptionHandler;
use crate::transport::http::post::AppState;

/// The well-known path prefix (RFC 9728 §3).
pub(in crate::transport::http) const WELL_KNOWN: &str = "/.well-known/oauth-protected-resource";

/// `scheme://host` of a request, `Host` as sent (it passed the allowed-hosts
/// check before anything here runs).
fn origin(req: &HttpRequest) -> String {
    let info = req.connection_info();
    let host = req
        .headers()
        .get(header::HOST)
        .and_then(|v| v.to_str().ok())
        .map_or_else(|| info.host().to_owned(), str::to_owned);
    format!("{}://{}", info.scheme(), host.to_ascii_lowercase())
}

/// The canonical resource URL of the MCP endpoint that `req` was sent to.
pub(in crate::transport::http) fn resource_of(req: &HttpRequest, auth: &AuthConfig) -> String {
    auth.resource
        .clone()
        .unwrap_or_else(|| format!("{}{}", origin(req), req.path()))
}

/// The URL of the metadata document of `resource`: the path form
/// `https://host/.well-known/oauth-protected-resource/<path>`, or the root
/// form when the resource has no path.
pub(in crate::transport::http) fn metadata_url(resource: &str) -> String {
    let after_scheme = resource.find("://").map_or(0, |i| i + 3);
    let (origin, path) = match resource[after_scheme..].find('/') {
        Some(i) => resource.split_at(after_scheme + i),
        None => (resource, ""),
    };
    let path = path.trim_end_matches('/');
    format!("{origin}{WELL_KNOWN}{path}")
}

/// `GET /.well-known/oauth-protected-resource[/<path>]`: the document, or 404
/// when the endpoint has no authentication.
pub(in crate::transport::http) async fn metadata<H: SubscriptionHandler>(
    req: HttpRequest,
    state: web::Data<AppState<H>>,
) -> HttpResponse {
    let Some(auth) = &state.config.auth else {
        return HttpResponse::NotFound().finish();
    };
    let resource = auth.resource.clone().unwrap_or_else(|| {
        let suffix = req.path().strip_prefix(WELL_KNOWN).unwrap_or_default();
        let path = if suffix.is_empty() {
            state.config.path.as_str()
        } else {
            suffix
        };
        format!("{}{path}", origin(&req))
    });
    let mut doc = Map::new();
    doc.insert("resource".into(), Value::from(resource));
    doc.insert(
        "authorization_servers".into(),
        json!(auth.authorization_servers),
    );
    if !auth.scopes_supported.is_empty() {
        doc.insert("scopes_supported".into(), json!(auth.scopes_supported));
    }
    doc.insert("bearer_methods_supported".into(), json!(["header"]));
    HttpResponse::Ok()
        .content_type("application/json")
        .insert_header((header::ACCESS_CONTROL_ALLOW_ORIGIN, "*"))
        .insert_header((header::CACHE_CONTROL, "max-age=3600"))
        .body(Value::Object(doc).to_string())
}

#[cfg(test)]
mod tests {
    use super::metadata_url;

    #[test]
    fn metadata_urls_insert_the_well_known_path() {
        assert_eq!(
            metadata_url("https://mcp.example.com/mcp"),
            "https://mcp.example.com/.well-known/oauth-protected-resource/mcp"
        );
        assert_eq!(
            metadata_url("https://mcp.example.com:8443"),
            "https://mcp.example.com:8443/.well-known/oauth-protected-resource"
        );
        assert_eq!(
            metadata_url("http://127.0.0.1:9/a/b/"),
            "http://127.0.0.1:9/.well-known/oauth-protected-resource/a/b"
        );
    }
}
