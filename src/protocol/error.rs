//! The protocol error model: one enum that knows its JSON-RPC code and HTTP status.

use serde::Serialize;
use serde_json::{Map, Value, json};

/// Where in the life of a request an error arose. The HTTP status of some codes
/// depends on it: a `-32602` found while validating the envelope is a `400`, the
/// same code returned by a tool handler travels in-band with `200`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Phase {
    /// Envelope, headers, `_meta` and parameter validation, before dispatch.
    Validation,
    /// Inside a handler, after the request was dispatched.
    Dispatch,
}

/// A protocol error: what goes into a JSON-RPC `error` object.
///
/// ```
/// use genmcp::protocol::{McpError, Phase};
/// let err = McpError::invalid_params("unknown tool: nope");
/// assert_eq!(err.code(), -32602);
/// assert_eq!(err.http_status(Phase::Validation), 400);
/// assert_eq!(err.http_status(Phase::Dispatch), 200);
/// ```
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum McpError {
    /// `-32700`: the body is not JSON.
    #[error("Parse error: {0}")]
    Parse(String),
    /// `-32600`: not a single JSON-RPC request or notification.
    #[error("Invalid Request: {0}")]
    InvalidRequest(String),
    /// `-32601`: unknown, removed, or not advertised method. HTTP 404.
    #[error("Method not found: {0}")]
    MethodNotFound(String),
    /// `-32602`: invalid params, missing `_meta` fields, unknown tool, bad cursor...
    #[error("{message}")]
    InvalidParams {
        /// Human-readable message.
        message: String,
        /// Optional structured detail.
        data: Option<Value>,
    },
    /// `-32603`: an unexpected server failure.
    #[error("{0}")]
    Internal(String),
    /// `-32020`: HTTP headers disagree with the body, or a required header is missing.
    #[error("{0}")]
    HeaderMismatch(String),
    /// `-32021`: the request needs a client capability it did not declare.
    #[error("{message}")]
    MissingClientCapability {
        /// Human-readable message.
        message: String,
        /// The capabilities required, as a `ClientCapabilities` object.
        required: Map<String, Value>,
    },
    /// `-32022`: the requested protocol version is not served.
    #[error("Unsupported protocol version: {requested}")]
    UnsupportedVersion {
        /// The versions this server serves.
        supported: Vec<String>,
        /// The version the client asked for, verbatim.
        requested: String,
    },
    /// `-32603` with HTTP 429: a limit per principal (or per client address)
    /// was hit. `data` names the limit and says when to retry; the HTTP
    /// transport adds `Retry-After`.
    #[error("{message}")]
    LimitExceeded {
        /// Which limit, as documented in `docs/security.md`
        /// (`max_streams_per_principal`, `requests_per_second`).
        limit: String,
        /// Human-readable message.
        message: String,
        /// Seconds after which a retry may succeed (at least 1).
        retry_after_secs: u64,
    },
    /// An application-defined error code (outside the reserved JSON-RPC range).
    #[error("{message}")]
    Application {
        /// The code; keep it outside `-32768..=-32000`.
        code: i64,
        /// Human-readable message.
        message: String,
        /// Optional structured detail.
        data: Option<Value>,
    },
}

/// The JSON-RPC `error` object.
#[derive(Clone, Debug, PartialEq, Serialize, serde::Deserialize)]
pub struct ErrorObject {
    /// The numeric code.
    pub code: i64,
    /// The message.
    pub message: String,
    /// Optional structured detail.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub data: Option<Value>,
}

impl McpError {
    /// `-32602` with a message.
    pub fn invalid_params(message: impl Into<String>) -> Self {
        McpError::InvalidParams {
            message: message.into(),
            data: None,
        }
    }

    /// `-32602` with a message and structured `data`.
    pub fn invalid_params_with(message: impl Into<String>, data: Value) -> Self {
        McpError::InvalidParams {
            message: message.into(),
            data: Some(data),
        }
    }

    /// `-32603` with a message.
    pub fn internal(message: impl Into<String>) -> Self {
        McpError::Internal(message.into())
    }

    /// `-32021` naming one required capability, e.g. `missing_capability("sampling")`
    /// gives `data.requiredCapabilities == {"sampling": {}}`.
    pub fn missing_capability(capability: &str) -> Self {
        let mut required = Map::new();
        required.insert(capability.to_owned(), json!({}));
        McpError::MissingClientCapability {
            message: format!("Server requires the {capability} client capability for this request"),
            required,
        }
    }

    /// `-32022` for `requested`, listing the served versions.
    pub fn unsupported_version(requested: impl Into<String>) -> Self {
        McpError::UnsupportedVersion {
            supported: super::SUPPORTED_VERSIONS
                .iter()
                .map(|v| (*v).to_owned())
                .collect(),
            requested: requested.into(),
        }
    }

    /// `-32603` / HTTP 429 for limit `limit`, retry after `retry_after_secs`.
    pub fn limit_exceeded(
        limit: impl Into<String>,
        message: impl Into<String>,
        retry_after_secs: u64,
    ) -> Self {
        McpError::LimitExceeded {
            limit: limit.into(),
            message: message.into(),
            retry_after_secs: retry_after_secs.max(1),
        }
    }

    /// The `Retry-After` seconds of a [`McpError::LimitExceeded`].
    pub fn retry_after(&self) -> Option<u64> {
        match self {
            McpError::LimitExceeded {
                retry_after_secs, ..
            } => Some(*retry_after_secs),
            _ => None,
        }
    }

    /// The JSON-RPC code.
    pub fn code(&self) -> i64 {
        match self {
            McpError::Parse(_) => -32700,
            McpError::InvalidRequest(_) => -32600,
            McpError::MethodNotFound(_) => -32601,
            McpError::InvalidParams { .. } => -32602,
            McpError::Internal(_) | McpError::LimitExceeded { .. } => -32603,
            McpError::HeaderMismatch(_) => -32020,
            McpError::MissingClientCapability { .. } => -32021,
            McpError::UnsupportedVersion { .. } => -32022,
            McpError::Application { code, .. } => *code,
        }
    }

    /// The HTTP status for this error on Streamable HTTP.
    ///
    /// The spec's MUSTs hold in every phase: `-32601` is 404; `-32020`, `-32021`,
    /// `-32022` are 400. Parse and envelope errors are 400. A `-32602` is 400 while
    /// validating and in-band (200) from a handler, like `-32603` and application
    /// codes (see `docs/errors.md`).
    pub fn http_status(&self, phase: Phase) -> u16 {
        if let McpError::LimitExceeded { .. } = self {
            return 429;
        }
        status_for_code(self.code(), phase)
    }

    /// The JSON-RPC `error` object.
    pub fn to_error_object(&self) -> ErrorObject {
        let data = match self {
            McpError::InvalidParams { data, .. } | McpError::Application { data, .. } => {
                data.clone()
            }
            McpError::MissingClientCapability { required, .. } => {
                Some(json!({ "requiredCapabilities": required }))
            }
            McpError::UnsupportedVersion {
                supported,
                requested,
            } => Some(json!({ "supported": supported, "requested": requested })),
            McpError::LimitExceeded {
                limit,
                retry_after_secs,
                ..
            } => Some(json!({ "limit": limit, "retryAfter": retry_after_secs })),
            _ => None,
        };
        let message = match self {
            McpError::UnsupportedVersion { .. } => "Unsupported protocol version".to_owned(),
            other => other.to_string(),
        };
        ErrorObject {
            code: self.code(),
            message,
            data,
        }
    }
}

/// The HTTP status for a JSON-RPC error `code` (see [`McpError::http_status`]).
pub fn status_for_code(code: i64, phase: Phase) -> u16 {
    match code {
        -32601 => 404,
        -32700 | -32600 | -32020 | -32021 | -32022 => 400,
        -32602 if phase == Phase::Validation => 400,
        _ => 200,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_and_statuses_follow_the_reference_table() {
        let cases: Vec<(McpError, i64, u16, u16)> = vec![
            (McpError::Parse("x".into()), -32700, 400, 400),
            (McpError::InvalidRequest("x".into()), -32600, 400, 400),
            (McpError::MethodNotFound("x".into()), -32601, 404, 404),
            (McpError::invalid_params("x"), -32602, 400, 200),
            (McpError::internal("x"), -32603, 200, 200),
            (McpError::HeaderMismatch("x".into()), -32020, 400, 400),
            (McpError::missing_capability("sampling"), -32021, 400, 400),
            (McpError::unsupported_version("v9"), -32022, 400, 400),
        ];
        for (err, code, validation, dispatch) in cases {
            assert_eq!(err.code(), code);
            assert_eq!(err.http_status(Phase::Validation), validation, "{err:?}");
            assert_eq!(err.http_status(Phase::Dispatch), dispatch, "{err:?}");
        }
    }

    #[test]
    fn structured_data_has_the_spec_shapes() {
        let obj = McpError::missing_capability("sampling").to_error_object();
        assert_eq!(
            obj.data,
            Some(json!({"requiredCapabilities": {"sampling": {}}}))
        );
        let obj = McpError::unsupported_version("v999.0.0").to_error_object();
        assert_eq!(obj.message, "Unsupported protocol version");
        assert_eq!(
            obj.data,
            Some(json!({"supported": ["2026-07-28"], "requested": "v999.0.0"}))
        );
    }
}
