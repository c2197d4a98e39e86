//! The HTTP replies every handler shares: refusals before a request is
//! served, overload, and JSON-RPC errors with their status.

use actix_web::HttpResponse;
use actix_web::http::{StatusCode, header};

use crate::protocol::jsonrpc::encode_error;
use crate::protocol::{McpError, Phase, RequestId};

pub(crate) async fn method_not_allowed() -> HttpResponse {
    HttpResponse::MethodNotAllowed()
        .insert_header((header::ALLOW, "POST"))
        .finish()
}

pub(super) fn json_response(status: u16, body: impl Into<bytes::Bytes>) -> HttpResponse {
    HttpResponse::build(StatusCode::from_u16(status).unwrap_or(StatusCode::OK))
        .content_type("application/json")
        .body(body.into())
}

pub(super) fn error_response(
    id: Option<&RequestId>,
    error: &McpError,
    phase: Phase,
) -> HttpResponse {
    with_retry_after(
        json_response(error.http_status(phase), encode_error(id, error)),
        error,
    )
}

/// A 4xx with an id-less JSON-RPC error body (transport-level refusals).
pub(super) fn refusal(status: StatusCode, message: String) -> HttpResponse {
    // No request id is read yet: `null`, as JSON-RPC has it for an error
    // whose request's id is not known.
    let body = serde_json::json!({
        "jsonrpc": "2.0",
        "id": null,
        "error": {"code": -32600, "message": message},
    });
    HttpResponse::build(status)
        .content_type("application/json")
        .body(body.to_string())
}

/// The message of a 503: stable, so clients can match it.
const OVERLOADED: &str = "Server overloaded: too many requests in flight; retry later";

pub(super) fn overloaded() -> HttpResponse {
    HttpResponse::ServiceUnavailable()
        .insert_header((header::RETRY_AFTER, "1"))
        .content_type("application/json")
        .body(encode_error(None, &McpError::internal(OVERLOADED)))
}

pub(super) fn too_large(limit: usize) -> HttpResponse {
    json_response(
        413,
        encode_error(
            None,
            &McpError::InvalidRequest(format!("request body larger than {limit} bytes")),
        ),
    )
}

/// Adds `Retry-After` to `resp` when `error` is a [`McpError::LimitExceeded`].
pub(crate) fn with_retry_after(mut resp: HttpResponse, error: &McpError) -> HttpResponse {
    if let Some(secs) = error.retry_after()
        && let Ok(v) = header::HeaderValue::from_str(&secs.to_string())
    {
        resp.headers_mut().insert(header::RETRY_AFTER, v);
    }
    resp
}
